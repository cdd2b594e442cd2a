"""Serving memory by stage: ``workbench.bench.serving_probe``'s steps, RSS after each.

    python benchmarks/serving_memory.py ROOT [KB_DIR] > result.json

ROOT holds ``config.yaml``, ``index/`` and ``queries.json`` (a list of queries); KB_DIR
defaults to ``ROOT/kb``. Prints VmRSS / VmHWM (MB) after the imports, the parsed KB,
``Engine.from_kb`` (jieba + snapshot), ``warm_up`` and the queries, the sizes of the
snapshot's arrays, and hybrid latency.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from pathlib import Path
from typing import Any


def _status() -> dict[str, float]:
    out = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                out[line.split(":")[0]] = round(int(line.split()[1]) / 1024, 1)
    return out


def _sparse_mb(m: Any) -> float:
    if m is None:
        return 0.0
    return round((m.data.nbytes + m.indices.nbytes + m.indptr.nbytes) / 2**20, 1)


def main(root: Path, kb_dir: Path) -> dict[str, Any]:
    import jieba  # noqa: F401  (imports are counted in the first stage)
    import lancedb  # noqa: F401

    from engine.config import EngineConfig
    from engine.parse_cache import ParseCache
    from engine.search import Engine
    from engine.tree import parse_kb

    stages = {"imports": _status()}
    cfg = EngineConfig.from_yaml((root / "config.yaml").read_text(encoding="utf-8"))
    kb = parse_kb(kb_dir, cache=ParseCache())
    gc.collect()
    stages["kb_parsed"] = _status()
    engine = Engine.from_kb(kb, root / "index", cfg)
    gc.collect()
    stages["snapshot_loaded"] = _status()
    engine.warm_up()
    gc.collect()
    stages["warm"] = _status()
    lat = []
    for q in json.loads((root / "queries.json").read_text(encoding="utf-8")):
        t = time.perf_counter()
        engine.search(q, mode="hybrid", rerank=False)
        lat.append((time.perf_counter() - t) * 1000)
    stages["queried"] = _status()
    snap = engine._shared.current().snapshot
    parts = {
        "vectors": round(snap.vectors.nbytes / 2**20, 1),
        "meta_arrow": round(snap.meta.nbytes / 2**20, 1),
        "bm25_counts": _sparse_mb(snap.lexical.counts),
        "bm25_title_counts": _sparse_mb(snap.lexical.title_counts),
    }
    for bm25 in snap._bm25.values():
        parts["bm25_weights"] = _sparse_mb(getattr(bm25, "_weights_cache", None))
        tm = getattr(bm25, "_term_major_cache", None)
        parts["bm25_term_major"] = _sparse_mb(tm[0]) + _sparse_mb(tm[1]) if tm else 0.0
    lat.sort()
    return {
        "rows": snap.rows,
        "stages": stages,
        "parts_mb": parts,
        "p50_ms": round(lat[len(lat) // 2], 2) if lat else None,
        "p95_ms": round(lat[int(len(lat) * 0.95)], 2) if lat else None,
    }


if __name__ == "__main__":
    root = Path(sys.argv[1])
    kb = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "kb"
    print(json.dumps(main(root, kb), indent=1))
