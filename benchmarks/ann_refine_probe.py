"""ANN probe: on a bench_scale folder with an index, the engine's own title queries through
``engine.ann.ann_search`` at each ``nprobes:refine_factor:k`` given; recall@10 (the top 10
of the k returned) against exact float32 cosine over the stored vectors, p50 / p95 ms.

    python benchmarks/ann_refine_probe.py --work /tmp/scale1m 850:100:10 850:34:30
    python benchmarks/ann_refine_probe.py --work /tmp/scale1m --shape 250:64 213:5:30

``--shape PARTITIONS:SUB_VECTORS`` copies the table to ``<work>/ann_shape_P_S`` (once) and
builds that IVF_PQ index on the copy, so index shapes compare on the same rows and queries.
The queries and their exact top 10 are cached in ``<work>/ann_probe_queries_N.npz``. Two
passes over the grid in one process (the machine is shared: compare within a run).
Produced benchmarks/results/ann_refine_1m_session5.json and ann_shape_1m_session6.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_scale import _config, stored_unit_vectors


def queries_and_exact(work: Path, manifest: Any, n: int) -> tuple[np.ndarray, list[set[str]]]:
    """The engine's sampled title queries (seed 7), embedded, and their exact top 10."""
    cache = work / f"ann_probe_queries_{n}.npz"
    if not cache.exists():
        from engine.embedding import make_embedder
        from engine.tree import parse_kb
        from workbench.bench.queries import sample_queries

        kb = parse_kb(work / "kb")
        qs = sample_queries(kb, n, seed=7)
        del kb
        embedder = make_embedder(_config([]).embedding)
        qv = np.stack([np.asarray(embedder.embed_query(q), dtype=np.float32) for q in qs])
        ids, mat = stored_unit_vectors(work / "index", manifest)
        top = np.stack([np.argpartition(-(mat @ v), 10)[:10] for v in qv])
        np.savez(cache, qv=qv, exact=ids[top].astype(str))
    z = np.load(cache)
    return z["qv"], [set(row.tolist()) for row in z["exact"]]


def shaped_table(work: Path, manifest: Any, shape: str) -> tuple[Any, str]:
    """A copy of the table with an IVF_PQ index of ``PARTITIONS:SUB_VECTORS``."""
    from lancedb.index import IvfPq

    from engine.store import Store

    parts, sub = (int(x) for x in shape.split(":"))
    dst = work / f"ann_shape_{parts}_{sub}"
    desc = f"IVF_PQ/cosine/partitions={parts}/sub_vectors={sub}"
    if not dst.exists():
        tmp = dst.with_name(dst.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        name = f"{manifest.table}.lance"
        shutil.copytree(work / "index" / name, tmp / name)
        tbl = Store(str(tmp)).open_table(manifest.table, None)
        t = time.perf_counter()
        config = IvfPq(distance_type="cosine", num_partitions=parts, num_sub_vectors=sub)
        tbl.create_index("vector", config=config, replace=True)
        print(json.dumps({"shape": desc, "index_s": round(time.perf_counter() - t, 1)}))
        tmp.rename(dst)
    return Store(str(dst)).open_table(manifest.table, None), desc


def main() -> None:
    from engine.ann import ann_search
    from engine.manifest import read_manifest
    from engine.store import Location, Store

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", required=True, help="bench_scale folder (kb/ and index/)")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--shape", help="PARTITIONS:SUB_VECTORS: probe a copy with this index")
    ap.add_argument("grid", nargs="+", help="nprobes:refine_factor:k")
    args = ap.parse_args()
    work = Path(args.work)
    m = read_manifest(Location(str(work / "index")))
    if m is None:
        sys.exit(f"no index under {work / 'index'}")
    qv, exact = queries_and_exact(work, m, args.queries)
    if args.shape:
        tbl, desc = shaped_table(work, m, args.shape)
    else:
        tbl, desc = Store(str(work / "index")).open_table(m.table, m.version), m.vector_index
    sys.stderr.write(f"ready: {desc}\n")
    for _ in range(2):
        for spec in args.grid:
            nprobes, refine, k = (int(x) for x in spec.split(":"))
            ms, rec = [], []
            for v, want in zip(qv, exact, strict=True):
                t0 = time.perf_counter()
                got = ann_search(tbl, v, k, nprobes=nprobes, refine_factor=refine)
                ms.append((time.perf_counter() - t0) * 1000)
                rec.append(len({i for i, _ in got[:10]} & want) / 10)
            row = {
                "index": desc,
                "nprobes": nprobes,
                "refine": refine,
                "k": k,
                "cands": refine * k,
                "recall@10": round(float(np.mean(rec)), 3),
                "p50": round(float(np.percentile(ms, 50)), 1),
                "p95": round(float(np.percentile(ms, 95)), 1),
                "load": round(os.getloadavg()[0], 2),
            }
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
