"""Search latency with and without passage vectors, on indexes bench_defaults.py built.

    python benchmarks/bench_passage_latency.py [--index .wikirag/bench/pingcap/index]
        [--without .wikirag/bench/pingcap/index@<key>] [--queries benchmarks/sets/...yaml]
        [--out benchmarks/results/passages_latency.json]

The two engines answer the same questions, interleaved query by query (so load changes
hit both alike), after a warm-up: p50 / p95 of ``Engine.search`` per mode, the query
embedding included, and how many passage vectors the snapshot holds.
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
        "no_passages": Engine.open(args.kb, args.without, off),
    }
    qs = [i.query for i in golden.load(args.queries).answerable()][:200]
    for eng in engines.values():
        for q in qs[:10]:
            eng.search(q)
    times: dict[str, dict[str, list[float]]] = {k: {"hybrid": [], "vector": []} for k in engines}
    for q in qs:
        for name, eng in engines.items():
            for mode in ("hybrid", "vector"):
                t0 = time.perf_counter()
                eng.search(q, mode=mode)
                times[name][mode].append((time.perf_counter() - t0) * 1000)

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
