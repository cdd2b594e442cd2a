"""The numpy USE and the ONNX USE side by side, in one run: speed, vectors and retrieval.

    python benchmarks/bench_embedder.py [--cache .wikirag/bench] [--sets cmrc,vue,...]
        [--sample 256] [--out benchmarks/results/embedder_onnx.json]

Per corpus, for ``embedding.provider`` ``use`` (numpy) and ``use-onnx`` (int8 ONNX):

- ``passages_per_s``: the same ``--sample`` chapter texts (as the indexer embeds them,
  seeded sample) through each embedder in the indexer's batches, the two interleaved batch
  by batch so load changes hit both alike; ``cosine`` of each text's two vectors.
- ``query_ms_p50``: ``embed_query`` of the set's questions (up to 200), median.
- ``index_full_s``: a full build of the whole corpus from scratch (only when the index is not
  in the cache yet; ``fresh`` says which). The indexes stay in the cache that
  ``benchmarks/bench_defaults.py`` reads (``<set>/index`` for the default, ``@<key>`` beside).
- MRR / Hit@5 / NDCG@10 per channel (hybrid, keyword, vector) with built-in defaults
  otherwise, through the workbench's Evaluator (``bench_defaults.evaluate_set``).

Every result records the load average at its start and end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

PROVIDERS = {"use": {"embedding.provider": "use"}, "use-onnx": {"embedding.provider": "use-onnx"}}


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def speed(kb_dir: str, questions: list[str], sample: int) -> dict:
    """Passages/s, query latency and per-text cosine of the two embedders on one corpus."""
    import numpy as np

    from engine.config import EmbeddingConfig
    from engine.embedding import make_embedder
    from engine.rows import embed_text
    from engine.tree import parse_kb

    nodes = sorted(parse_kb(kb_dir).nodes.values(), key=lambda n: n.node_id)
    texts = [embed_text(n, 1500) for n in random.Random(7).sample(nodes, min(sample, len(nodes)))]
    embs = {p: make_embedder(EmbeddingConfig(provider=p)) for p in PROVIDERS}
    for e in embs.values():
        e.embed_query("warm up")
    spent = dict.fromkeys(PROVIDERS, 0.0)
    vecs: dict[str, list] = {p: [] for p in PROVIDERS}
    for start in range(0, len(texts), 32):
        batch = texts[start : start + 32]
        for p, e in embs.items():
            t0 = time.perf_counter()
            vecs[p].append(e.embed_documents(batch))
            spent[p] += time.perf_counter() - t0
    a, b = (np.concatenate(vecs[p]) for p in PROVIDERS)
    cos = (a * b).sum(axis=1)
    out: dict = {"texts": len(texts), "mean_chars": round(sum(map(len, texts)) / len(texts))}
    for p, e in embs.items():
        times = []
        for q in questions[:200]:
            t0 = time.perf_counter()
            e.embed_query(q)
            times.append((time.perf_counter() - t0) * 1000)
        out[p] = {
            "passages_per_s": round(len(texts) / spent[p], 1),
            "query_ms_p50": round(statistics.median(times), 3),
        }
    out["speedup"] = round(out["use-onnx"]["passages_per_s"] / out["use"]["passages_per_s"], 2)
    out["cosine"] = {"min": round(float(cos.min()), 4), "mean": round(float(cos.mean()), 4)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", default=str(ROOT / ".wikirag" / "bench"))
    ap.add_argument("--sets", default="cmrc,wiki,vue,handbook,faq-written,faq-headings")
    ap.add_argument("--sample", type=int, default=256)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/embedder_onnx.json"))
    args = ap.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    import bench_defaults as bd

    from engine.config import EngineConfig
    from workbench.eval import golden

    cache = Path(args.cache)
    by_name = {s.name: s for s in bd.bench_sets(bd.SHARED)}
    report: dict = {"created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    report.update(
        load_start=_load(), command=" ".join(["benchmarks/bench_embedder.py", *sys.argv[1:]])
    )
    report["sets"] = {}
    speeds: dict[str, dict] = {}
    for name in args.sets.split(","):
        bs = by_name[name]
        kb, ds = bs.kb, bs.dataset
        if name == "cmrc":
            kb, ds = bd.prepare_cmrc(bd.SHARED / "benchmarks" / "cmrc2018-trial", cache / "cmrc")
        index = cache / bs.index_name / "index"
        row: dict = {"load_start": _load(), "builds": {}}
        for p, ov in PROVIDERS.items():
            cfg = EngineConfig().with_overrides(ov)
            loc = (
                index
                if cfg.index_key == EngineConfig().index_key
                else Path(f"{index}@{cfg.index_key}")
            )
            fresh = not loc.exists()
            secs = bd.ensure_index(kb, loc, cfg)
            row["builds"][p] = {
                "index_full_s" if fresh else "refresh_s": round(secs, 1),
                "fresh": fresh,
            }
        if bs.index_name not in speeds:
            questions = [i.query for i in golden.load(ds).answerable()]
            speeds[bs.index_name] = speed(kb, questions, args.sample)
        row["speed"] = speeds[bs.index_name]
        res = bd.evaluate_set(bs, kb, ds, index, list(PROVIDERS.items()), None)
        row["queries"] = res["queries"]
        row["channels"] = {p: {m: res["configs"][p][m] for m in bd.MODES} for p in PROVIDERS}
        row["mrr_delta"] = {
            m: round(row["channels"]["use-onnx"][m]["mrr"] - row["channels"]["use"][m]["mrr"], 4)
            for m in bd.MODES
        }
        row["load_end"] = _load()
        report["sets"][name] = row
        print(name, json.dumps(row["mrr_delta"]), json.dumps(row["builds"]), file=sys.stderr)
        report["load_end"] = _load()
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(report, ensure_ascii=False, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
