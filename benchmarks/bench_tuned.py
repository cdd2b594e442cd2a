"""Tuned on the tune split, scored on unseen questions: what `wikirag optimize` buys per set.

    python benchmarks/bench_tuned.py [--cache .wikirag/bench] [--sets handbook,wiki,...]
        [--trials 100] [--seed 0] [--guard narrow|all]
        [--out benchmarks/results/tuned.json] [--md benchmarks/results/tuned.md]

Per set of ``bench_defaults.py`` (same indexes, same cache): the product's own optimizer
(``workbench.tune.optimizer.optimize``, dry run: nothing is written) searches on the golden
set's tune split from the KB's baseline (the bundled wiki's accepted one for the two wiki
sets, built-in defaults elsewhere) and submits its pick to the acceptance rule. The
"tuned" config is the pick when the rule accepts it, else the baseline. Both are then
scored on the holdout split, which neither the search nor the rule saw: MRR and Hit@5 of
the hybrid ranking, as ``wikirag eval --split holdout`` would report them.

``--guard`` is what a user does when the size guard says the set is too small for the
search: ``narrow`` (the default) searches only the parameters it can carry, ``all`` the
whole space; both search past a detectable-effect warning (``--yes``) and the guard's words
are kept in the result's ``notes``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_defaults import SHARED, bench_sets, ensure_index, prepare_cmrc  # noqa: E402

MEASURES = ("mrr", "hit@5")


def _holdout(ws, cfg, gs) -> dict[str, float]:
    """Hybrid MRR / Hit@5 of ``cfg`` on the holdout split's answerable questions."""
    from workbench.eval.engines import evaluator

    ids = [i.id for i in gs.answerable("holdout")]
    run = evaluator(ws, cfg).run(gs, cfg, modes=("hybrid",), item_ids=ids)
    means = run.means("hybrid")
    return {m: round(float(means.get(m, 0.0)), 4) for m in MEASURES}


def tune_set(name: str, kb: str, ds: str, index: Path, experiments: Path, args) -> dict:
    from engine.config import EngineConfig
    from workbench.eval import golden
    from workbench.eval.engines import evaluator
    from workbench.tune.optimizer import optimize
    from workbench.workspace import resolve

    ws = resolve(kb=kb, index=index, dataset=ds, experiments_root=experiments)
    base = ws.load_config()
    # The workspace's index is the baseline's own (bench_defaults' side index when the
    # baseline embeds or tokenizes otherwise than the built-in defaults).
    if base.index_key != EngineConfig().index_key:
        ws = replace(ws, index=Path(f"{index}@{base.index_key}"))
    ensure_index(kb, ws.index, base)
    gs = golden.load(ds)
    t0 = time.perf_counter()
    out = optimize(
        ws,
        lambda cfg: evaluator(ws, cfg),
        trials=args.trials,
        seed=args.seed,
        dry_run=True,
        narrow=args.guard == "narrow",
        yes=True,
    )
    res = out.experiment
    accepted = bool(res is not None and res.decision.accepted)
    tuned = EngineConfig.from_yaml(res.cand_yaml) if accepted and res else base
    row = {
        "kb": kb,
        "dataset": ds,
        "baseline": "experiments/wiki/baseline.yaml" if ws.config_path else "built-in defaults",
        "queries": {s: len(gs.answerable(s)) for s in ("tune", "holdout")},
        "trials": len(out.study.trials),
        "searched": [spec.get("key", spec.get("name")) for spec in out.study.space],
        "notes": list(out.study.notes),
        "submitted": res is not None,
        "verdict": res.verdict if res is not None else "nothing beat the baseline by 1 SE",
        "changes": {k: list(v) for k, v in res.changes.items()} if res is not None else {},
        "holdout_baseline": _holdout(ws, base, gs),
        "holdout_tuned": _holdout(ws, tuned, gs),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    print(
        f"  {name:17s} {row['verdict']:32s} holdout MRR {row['holdout_baseline']['mrr']:.3f} -> "
        f"{row['holdout_tuned']['mrr']:.3f}, Hit@5 {row['holdout_baseline']['hit@5']:.3f} -> "
        f"{row['holdout_tuned']['hit@5']:.3f} ({row['seconds']} s)",
        file=sys.stderr,
    )
    return row


def _num(value: object) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def markdown(report: dict) -> str:
    lines = [
        "| set (tune / holdout q) | keys searched | verdict | changes | "
        "holdout MRR baseline → tuned | holdout Hit@5 baseline → tuned |",
        "|---|---|---|---|---|---|",
    ]
    for name, r in report["sets"].items():
        q = r["queries"]
        changes = (
            ", ".join(f"`{k}` {_num(a)} → {_num(b)}" for k, (a, b) in r["changes"].items()) or "–"
        )
        hb, ht = r["holdout_baseline"], r["holdout_tuned"]
        lines.append(
            f"| {name} ({q['tune']} / {q['holdout']}) | {len(r['searched'])} | {r['verdict']} | "
            f"{changes} | "
            f"{hb['mrr']:.3f} → {ht['mrr']:.3f} | {hb['hit@5']:.3f} → {ht['hit@5']:.3f} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / ".wikirag" / "bench"))
    ap.add_argument("--shared", default=str(SHARED))
    ap.add_argument("--sets", default="", help="comma-separated subset of set names")
    ap.add_argument("--trials", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--guard", choices=("narrow", "all"), default="narrow")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/tuned.json"))
    ap.add_argument("--md", default=str(ROOT / "benchmarks/results/tuned.md"))
    args = ap.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    shared, cache = Path(args.shared), Path(args.cache)
    by_name = {s.name: s for s in bench_sets(shared)}
    wanted = [s for s in args.sets.split(",") if s] or list(by_name)
    unknown = set(wanted) - set(by_name)
    if unknown:
        print(f"error: unknown set(s) {sorted(unknown)}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    results: dict[str, dict] = {}
    # The wiki sets start from the bundled wiki's accepted baseline; the others from the
    # built-in defaults (an empty experiments folder: no baseline there).
    empty = Path(tempfile.mkdtemp(prefix="wikirag-tuned-"))
    for name in wanted:
        bs = by_name[name]
        kb, ds = bs.kb, bs.dataset
        if name == "cmrc":
            kb, ds = prepare_cmrc(shared / "benchmarks" / "cmrc2018-trial", cache / "cmrc")
        if not Path(kb).is_dir() or not Path(ds).is_file():
            print(f"skipping set {name}: {kb} or {ds} missing", file=sys.stderr)
            continue
        print(f"== {name}", file=sys.stderr)
        experiments = ROOT / "experiments" if bs.index_name == "wiki" else empty
        index = cache / bs.index_name / "index"
        results[name] = tune_set(name, kb, ds, index, experiments, args)
    report = {
        "command": "python benchmarks/bench_tuned.py "
        + " ".join(argv if argv is not None else sys.argv[1:]),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "seconds": round(time.perf_counter() - t0, 1),
        "load": [round(x, 2) for x in os.getloadavg()],
        "sets": results,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    text = markdown(report)
    Path(args.md).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
