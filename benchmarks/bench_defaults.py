"""Defaults by measurement: every channel of every candidate config on several question sets.

    python benchmarks/bench_defaults.py [--cache .wikirag/bench] [--quick]
        [--candidate "expansion.enabled=false"] [--candidate "fusion.k=30 fusion.bm25_weight=2"]
        [--sets cmrc,faq-written,...] [--out benchmarks/results/defaults.json]
        [--md benchmarks/results/defaults.md]

A candidate is one config: built-in defaults plus space- or comma-separated KEY=VALUE
overrides (any key `wikirag config keys` lists; a key this checkout does not know is
reported and that candidate skipped, so the same command works before and after new keys
land). Built-in defaults are always candidate "defaults".

Per set: the index is built once into ``<cache>/<set>/index`` with the built-in defaults
(incremental afterwards), candidates are retrieved once per query and cached in
``<index>/cache`` (the workbench's own EvalCache), and each candidate is re-scored from
that cache with ``workbench.eval.evaluate.Evaluator``; only changes to what is retrieved
(``expansion.*``, ``lexical.*``, ``embedding.*``, ``index.*``) cost a retrieval pass, and
changes to what is embedded get a side index ``<index>@<key>``.

For each candidate the report says whether hybrid MRR >= best single channel - 0.005 on
every set (the issue 11 constraint) and ranks candidates by mean hybrid MRR over sets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The shared data sits beside the main checkout (../shared) or above a worktree (../../shared).
SHARED = next(
    (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
    ROOT.parent / "shared" / "data",
)
MODES = ("hybrid", "keyword", "vector")
MEASURES = ("mrr", "hit@5", "ndcg@10", "recall@5")
TOLERANCE = 0.005  # hybrid may trail the best single channel by this much MRR


@dataclass(frozen=True)
class BenchSet:
    name: str
    kb: str  # KB folder ("" = generated under the cache)
    dataset: str  # golden set path ("" = generated under the cache)
    index_name: str  # sets over the same KB share one index
    quick: bool  # part of --quick


def bench_sets(shared: Path) -> list[BenchSet]:
    corpora = shared / "corpora"
    sets = ROOT / "benchmarks" / "sets"
    return [
        BenchSet("cmrc", "", "", "cmrc", True),
        BenchSet(
            "faq-written",
            str(corpora / "pingcap-docs-cn"),
            str(sets / "pingcap-faq-written.yaml"),
            "pingcap",
            False,
        ),
        BenchSet(
            "faq-headings",
            str(corpora / "pingcap-docs-cn"),
            str(sets / "pingcap-faq-headings.yaml"),
            "pingcap",
            False,
        ),
        BenchSet(
            "vue", str(corpora / "vue-docs-zh-cn"), str(sets / "vue-written.yaml"), "vue", True
        ),
        BenchSet(
            "handbook",
            str(corpora / "gitlab-handbook"),
            str(sets / "handbook-written.yaml"),
            "handbook",
            True,
        ),
        BenchSet("wiki", str(ROOT / "wiki"), str(ROOT / "datasets" / "wiki.yaml"), "wiki", True),
        # Questions about the bundled wiki written by someone who did not write the wiki
        BenchSet(
            "wiki-independent",
            str(ROOT / "wiki"),
            str(sets / "wiki-independent.yaml"),
            "wiki",
            True,
        ),
    ]


def parse_candidate(text: str) -> tuple[str, dict]:
    from engine.config import parse_override

    items = [t for t in text.replace(",", " ").split() if t]
    overrides = dict(parse_override(t) for t in items)
    return (" ".join(items) or "defaults"), overrides


def prepare_cmrc(data: Path, work: Path) -> tuple[str, str]:
    """KB of paragraphs + golden set from the BEIR folder (regenerated, never committed)."""
    kb, ds = work / "kb", work / "cmrc.yaml"
    if not (kb.is_dir() and ds.is_file()):
        shutil.rmtree(kb, ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "workbench.cli", "import-beir", str(data)]
        cmd += ["--kb-out", str(kb), "--dataset-out", str(ds)]
        subprocess.run(
            cmd,
            check=True,
            capture_output=True,
            text=True,
        )
    return str(kb), str(ds)


_ENSURED: set[str] = set()  # indexes already refreshed in this run (two sets share pingcap)


def ensure_index(kb_dir: str, index: Path, cfg) -> float:
    """Build or refresh an index with ``cfg``; returns seconds spent."""
    from engine.indexer import build_index
    from engine.tree import parse_kb

    if str(index) in _ENSURED:
        return 0.0
    _ENSURED.add(str(index))
    t0 = time.perf_counter()
    index.parent.mkdir(parents=True, exist_ok=True)

    def show(done: int, total: int, stage: str) -> None:
        if total and (done == total or done % 512 == 0):
            print(f"  {index.name}: {stage} {done}/{total}", file=sys.stderr)

    build_index(parse_kb(kb_dir), cfg, str(index), show)
    return time.perf_counter() - t0


def _pick(means: dict[str, float]) -> dict[str, float]:
    return {m: round(float(means.get(m, 0.0)), 4) for m in MEASURES}


def evaluate_set(
    bs: BenchSet,
    kb_dir: str,
    dataset: str,
    index: Path,
    candidates: list[tuple[str, dict]],
    limit: int | None,
) -> dict:
    from engine.config import EngineConfig
    from engine.search import Engine
    from workbench.eval import golden
    from workbench.eval.evaluate import EvalCache

    base = EngineConfig()
    gs = golden.load(dataset)
    items = gs.answerable()
    ids = [i.id for i in items[:limit]] if limit else None
    out = {
        "kb": kb_dir,
        "dataset": dataset,
        "dataset_hash": gs.content_hash,
        "queries": len(ids) if ids else len(items),
        "index_s": round(ensure_index(kb_dir, index, base), 1),
        "configs": {},
    }
    engines: dict[str, Engine] = {}
    caches: dict[str, EvalCache] = {}
    for label, overrides in candidates:
        cfg = base.with_overrides(overrides) if overrides else base
        key = cfg.index_key
        loc = index if key == base.index_key else Path(f"{index}@{key}")
        if str(loc) not in engines:
            if loc != index:
                ensure_index(kb_dir, loc, cfg)
            engines[str(loc)] = Engine.open(kb_dir, loc, cfg)
            caches[str(loc)] = EvalCache.open(loc / "cache")
        from workbench.eval.evaluate import Evaluator

        t0 = time.perf_counter()
        ev = Evaluator(engines[str(loc)].with_config(cfg), caches[str(loc)])
        run = ev.run(gs, cfg, modes=MODES, item_ids=ids)
        caches[str(loc)].save()
        row = {m: _pick(run.means(m)) for m in MODES}
        best_single = max(row["keyword"]["mrr"], row["vector"]["mrr"])
        row["best_single_mrr"] = best_single
        row["hybrid_ok"] = row["hybrid"]["mrr"] >= best_single - TOLERANCE
        row["seconds"] = round(time.perf_counter() - t0, 2)
        row["cache_misses"] = run.cache_misses
        out["configs"][label] = row
        print(
            f"  {bs.name:13s} {label[:60]:60s} hybrid {row['hybrid']['mrr']:.3f} "
            f"kw {row['keyword']['mrr']:.3f} vec {row['vector']['mrr']:.3f} "
            f"{'ok' if row['hybrid_ok'] else 'LOSES'} ({row['seconds']}s)",
            file=sys.stderr,
        )
    return out


def summarize(results: dict) -> dict:
    """Per candidate: mean hybrid MRR over sets, sets where hybrid loses, worst margin."""
    labels: list[str] = []
    for s in results.values():
        labels += [c for c in s["configs"] if c not in labels]
    summary = {}
    for label in labels:
        rows = [s["configs"][label] for s in results.values() if label in s["configs"]]
        if len(rows) != len(results):
            continue  # not scored on every set
        margins = [r["hybrid"]["mrr"] - r["best_single_mrr"] for r in rows]
        summary[label] = {
            "mean_hybrid_mrr": round(sum(r["hybrid"]["mrr"] for r in rows) / len(rows), 4),
            "mean_hybrid_hit@5": round(sum(r["hybrid"]["hit@5"] for r in rows) / len(rows), 4),
            "worst_margin_vs_best_single": round(min(margins), 4),
            "sets_where_hybrid_loses": [
                name
                for name, s in results.items()
                if label in s["configs"] and not s["configs"][label]["hybrid_ok"]
            ],
        }
    ok = {k: v for k, v in summary.items() if not v["sets_where_hybrid_loses"]}
    pool = ok or summary
    best = max(pool, key=lambda k: pool[k]["mean_hybrid_mrr"]) if pool else None
    return {"candidates": summary, "best": best, "best_meets_constraint": bool(ok)}


def short(label: str) -> str:
    """Labels readable in a table: section prefixes dropped (the JSON keeps full keys)."""
    text = label.replace("expansion.enabled=false", "expansion=off")
    for prefix in ("fusion.", "lexical.", "expansion.", "search.", "injection."):
        text = text.replace(prefix, "")
    return text


def focus_labels(report: dict, top: int) -> list[str] | None:
    """Defaults, expansion off and the ``top`` best candidates that meet the constraint."""
    if not top:
        return None
    cands = report["summary"]["candidates"]
    ranked = sorted(
        (k for k, v in cands.items() if not v["sets_where_hybrid_loses"]),
        key=lambda k: -cands[k]["mean_hybrid_mrr"],
    )
    return list(dict.fromkeys(["defaults", "expansion.enabled=false", *ranked[:top]]))


def markdown(report: dict, top: int = 0) -> str:
    res = report["sets"]
    focus = focus_labels(report, top)
    head = "| set (queries) | config | " + " | ".join(
        f"{m} MRR | {m} Hit@5 | {m} nDCG@10" for m in MODES
    )
    lines = [head + " | hybrid ≥ best single − 0.005 |", "|" + "---|" * (3 + 3 * len(MODES))]
    for name, s in res.items():
        for label, r in s["configs"].items():
            if focus is not None and label not in focus:
                continue
            cells = [f"{name} ({s['queries']})", f"`{short(label)}`"]
            for m in MODES:
                cells += [f"{r[m]['mrr']:.3f}", f"{r[m]['hit@5']:.3f}", f"{r[m]['ndcg@10']:.3f}"]
            cells.append("yes" if r["hybrid_ok"] else f"**no** ({r['best_single_mrr']:.3f})")
            lines.append("| " + " | ".join(cells) + " |")
    summ = report["summary"]
    lines += [
        "",
        "| config | mean hybrid MRR | mean hybrid Hit@5 | worst hybrid − best single | "
        "sets where hybrid loses |",
        "|---|---|---|---|---|",
    ]
    ranked = sorted(summ["candidates"].items(), key=lambda kv: -kv[1]["mean_hybrid_mrr"])
    for label, c in ranked:
        loses = ", ".join(c["sets_where_hybrid_loses"]) or "none"
        lines.append(
            f"| `{short(label)}` | {c['mean_hybrid_mrr']:.4f} | {c['mean_hybrid_hit@5']:.4f} | "
            f"{c['worst_margin_vs_best_single']:+.4f} | {loses} |"
        )
    if summ["best"]:
        note = "" if summ["best_meets_constraint"] else " (no candidate meets the constraint)"
        best = f"`{summ['best']}`{note}"
        lines += ["", f"Best by mean hybrid MRR under the constraint: {best}."]
    return "\n".join(lines) + "\n"


def merge(paths: list[str], out: str, md: str, top: int = 0) -> int:
    """One report from several runs (e.g. the big KB run separately): sets and commands."""
    sets: dict[str, dict] = {}
    commands = []
    for path in paths:
        rep = json.loads(Path(path).read_text(encoding="utf-8"))
        commands.append(rep.get("command", ""))
        for name, s in rep["sets"].items():
            sets.setdefault(name, {**s, "configs": {}})["configs"].update(s["configs"])
            sets[name]["command"] = rep.get("command", "")
    report = {
        "commands": commands,
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tolerance": TOLERANCE,
        "sets": sets,
    }
    report["summary"] = summarize(sets)
    write_report(report, out, md, top)
    return 0


def write_report(report: dict, out: str, md: str, top: int = 0) -> None:
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    text = markdown(report, top)
    Path(md).write_text(text, encoding="utf-8")
    print(text)
    print(f"wrote {out} and {md}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / ".wikirag" / "bench"))
    ap.add_argument("--shared", default=str(SHARED), help="the shared data folder")
    ap.add_argument("--candidate", action="append", default=[], help="KEY=VALUE [KEY=VALUE]")
    ap.add_argument("--no-defaults", action="store_true", help="skip the built-in defaults")
    ap.add_argument("--sets", default="", help="comma-separated subset of set names")
    ap.add_argument("--quick", action="store_true", help="small sets only, <= 200 queries each")
    ap.add_argument("--limit", type=int, default=0, help="at most N queries per set")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/defaults.json"))
    ap.add_argument("--md", default=str(ROOT / "benchmarks/results/defaults.md"))
    ap.add_argument(
        "--top", type=int, default=0, help="per-set rows: defaults + the N best (0 = all)"
    )
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="JSON",
        help="combine earlier result files (later files win per set) instead of running",
    )
    args = ap.parse_args(argv)
    if args.merge:
        return merge(args.merge, args.out, args.md, args.top)
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    from engine.config import EngineConfig
    from engine.errors import ConfigError

    candidates: list[tuple[str, dict]] = [] if args.no_defaults else [("defaults", {})]
    skipped = {}
    for text in args.candidate:
        try:
            label, ov = parse_candidate(text)
            EngineConfig().with_overrides(ov)
        except ConfigError as exc:
            skipped[text] = str(exc).split(";")[0]
            print(f"skipping candidate {text!r}: {skipped[text]}", file=sys.stderr)
            continue
        if label not in [c[0] for c in candidates]:
            candidates.append((label, ov))
    if not candidates:
        print("error: no candidate config to evaluate", file=sys.stderr)
        return 2

    shared, cache = Path(args.shared), Path(args.cache)
    wanted = [s for s in args.sets.split(",") if s]
    by_name = {s.name: s for s in bench_sets(shared)}
    sets = [by_name[n] for n in wanted if n in by_name] if wanted else list(by_name.values())
    sets = [s for s in sets if s.quick or not args.quick]
    unknown = set(wanted) - set(by_name)
    if unknown:
        print(f"error: unknown set(s) {sorted(unknown)}", file=sys.stderr)
        return 2
    limit = args.limit or (200 if args.quick else 0) or None

    results: dict[str, dict] = {}
    t0 = time.perf_counter()
    for bs in sets:
        kb, ds = bs.kb, bs.dataset
        if bs.name == "cmrc":
            kb, ds = prepare_cmrc(shared / "benchmarks" / "cmrc2018-trial", cache / "cmrc")
        if not Path(kb).is_dir() or not Path(ds).is_file():
            print(f"skipping set {bs.name}: {kb} or {ds} missing", file=sys.stderr)
            continue
        print(f"== {bs.name}", file=sys.stderr)
        results[bs.name] = evaluate_set(
            bs, kb, ds, cache / bs.index_name / "index", candidates, limit
        )
    report = {
        "command": "python benchmarks/bench_defaults.py "
        + " ".join(
            (f'"{a}"' if " " in a else a) for a in (argv if argv is not None else sys.argv[1:])
        ),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.perf_counter() - t0, 1),
        "tolerance": TOLERANCE,
        "skipped_candidates": skipped,
        "sets": results,
    }
    report["summary"] = summarize(results)
    write_report(report, args.out, args.md, args.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
