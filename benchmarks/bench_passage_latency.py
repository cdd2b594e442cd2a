"""Search latency with and without passage vectors, on indexes bench_defaults.py built.

    python benchmarks/bench_passage_latency.py [--index .wikirag/bench/pingcap/index]
        [--without .wikirag/bench/pingcap/index@<key>] [--queries benchmarks/sets/...yaml]
        [--out benchmarks/results/passages_latency.json]

Three engines answer the same questions, interleaved query by query (so load changes
hit all alike), after a warm-up: the defaults (passage vectors, sign-bit codes picking the
vectors scored above ``search.exact_vector_rows``), the same index scanned exactly
(``search.exact_vector_rows: 0``), and one vector per chapter. Per engine and mode: p50 /
p95 of ``Engine.search``, the query embedding included; per stage, the median of each
search's own timings (embed, vector, bm25, fusion); how many passage vectors the snapshot
holds; and how often the coded vector channel's pool equals the exact one's (recall@pool).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = next(p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir())


def main(argv: list[str] | None = None) -> int:
    from engine.config import EngineConfig
    from engine.search import Engine
    from workbench.eval import golden

    base = EngineConfig()
    off = base.with_overrides({"index.passage_chars": 0})
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", default=str(SHARED / "corpora" / "pingcap-docs-cn"))
    ap.add_argument("--index", default=str(ROOT / ".wikirag/bench/pingcap/index"))
    ap.add_argument(
        "--without", default=str(ROOT / f".wikirag/bench/pingcap/index@{off.index_key}")
    )
    ap.add_argument("--queries", default=str(ROOT / "benchmarks/sets/pingcap-faq-written.yaml"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/passages_latency.json"))
    args = ap.parse_args(argv)
    load0 = [round(x, 2) for x in os.getloadavg()]
    engines = {
        "passages": Engine.open(args.kb, args.index, base),
        "passages_exact": Engine.open(
            args.kb, args.index, base.with_overrides({"search.exact_vector_rows": 0})
        ),
        "no_passages": Engine.open(args.kb, args.without, off),
    }
    qs = [i.query for i in golden.load(args.queries).answerable()][:200]
    for eng in engines.values():
        for q in qs[:10]:
            eng.search(q)
    times: dict[str, dict[str, list[float]]] = {k: {"hybrid": [], "vector": []} for k in engines}
    stages: dict[str, dict[str, list[float]]] = {k: {} for k in engines}
    for q in qs:
        for name, eng in engines.items():
            for mode in ("hybrid", "vector"):
                t0 = time.perf_counter()
                res = eng.search(q, mode=mode)
                times[name][mode].append((time.perf_counter() - t0) * 1000)
                if mode == "hybrid":
                    for stage, ms in res.timings.items():
                        stages[name].setdefault(stage, []).append(ms)
    recall = []
    for q in qs:
        coded = {n for n, _ in engines["passages"].candidates(q, pool=30, mode="vector").vector}
        exact = engines["passages_exact"].candidates(q, pool=30, mode="vector").vector
        recall.append(len(coded & {n for n, _ in exact}) / max(1, len(exact)))

    def p95(xs: list[float]) -> float:
        return sorted(xs)[max(0, round(0.95 * len(xs)) - 1)]

    out = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "kb": args.kb,
        "queries": len(qs),
        "load_start": load0,
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "chapters": engines["passages"]._shared.current().snapshot.rows,
        "passages": len(engines["passages"]._shared.current().snapshot.passages),
        "vector_recall_at_30_coded_vs_exact": round(statistics.mean(recall), 4),
        "stage_ms_p50": {
            name: {k: round(statistics.median(v), 2) for k, v in st.items()}
            for name, st in stages.items()
        },
        "ms": {
            name: {
                mode: {"p50": round(statistics.median(v), 2), "p95": round(p95(v), 2)}
                for mode, v in modes.items()
            }
            for name, modes in times.items()
        },
    }
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
