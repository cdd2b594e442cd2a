"""Vector search at scale: exact numpy vs LanceDB's approximate indexes, recall@10 and latency.

    nice -n 10 python benchmarks/bench_ann.py --index DIR [--index DIR2 ...] \\
        [--rows 300000] [--queries 200] --json benchmarks/results/ann.json

For each index (a ``wikirag index`` folder: its manifest's table version is read), the
stored vectors are split into a base set and ``--queries`` held-out rows (a fixed seed)
whose vectors are the queries; a scratch LanceDB table of the base (id + vector) is
written under ``--work`` and every candidate index is built on it in turn. For each:
build seconds, then per query setting (nprobes, refine_factor, ef) recall@10 against exact
float32 cosine (numpy) and search latency p50/p95, as ``engine.ann.ann_search`` runs it.
The exact paths are timed too: numpy float32 (einsum, what serving does today) and
LanceDB's flat scan. ``--rows`` caps the base (the first rows, id order). Scratch tables are
deleted at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

K = 10


def load_vectors(
    index: str, rows: int | None
) -> tuple[list[str], np.ndarray, list[str], dict[str, str]]:
    """Ids, unit vectors and titles of the index's rows (id order), and its embedder.

    An index still being built has no manifest yet: its newest chapters table is read as
    it stands (the signature then comes from ``--embedder``).
    """
    from engine.manifest import read_manifest
    from engine.store import Location, Store, vectors_of

    loc = Location(index)
    m = read_manifest(loc)
    store = Store(index)
    if m is not None:
        tbl = store.open_table(m.table, m.version)
        sig = m.embedder_signature.to_dict()
    else:
        names = [n for n in store.table_names() if n.startswith("chapters_")]
        if not names:
            raise SystemExit(f"no index at {index}; build one with `wikirag index`")
        tbl, sig = store.open_table(names[-1]), {}
    data = Store.read(tbl, ["id", "vector", "title", "level"])
    ids = data.column("id").to_pylist()
    titles = [
        t if lv >= 1 else ""
        for t, lv in zip(
            data.column("title").to_pylist(), data.column("level").to_pylist(), strict=True
        )
    ]
    mat = np.array(vectors_of(data), dtype=np.float32)
    order = np.argsort(np.array(ids, dtype=object))
    if rows:
        order = order[:rows]
    mat = mat[order]
    mat /= np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
    return [ids[i] for i in order], mat, [titles[i] for i in order], sig


def _pcts(ms: list[float]) -> dict[str, float]:
    a = np.asarray(ms)
    return {
        "p50_ms": round(float(np.percentile(a, 50)), 2),
        "p95_ms": round(float(np.percentile(a, 95)), 2),
    }


def exact_top(base: np.ndarray, q: np.ndarray) -> np.ndarray:
    sims = np.einsum("ij,j->i", base, q)
    top = np.argpartition(-sims, K)[:K]
    return top[np.argsort(-sims[top])]


def lance_search(tbl: Any, q: np.ndarray, setting: dict[str, int]) -> list[str]:
    query = tbl.search(q).distance_type("cosine")
    if setting.get("flat"):
        query = query.bypass_vector_index()
    if "nprobes" in setting:
        query = query.nprobes(setting["nprobes"])
    if setting.get("refine_factor"):
        query = query.refine_factor(setting["refine_factor"])
    if "ef" in setting:
        query = query.ef(setting["ef"])
    return query.select(["id"]).limit(K).to_arrow().column("id").to_pylist()  # type: ignore


def measure(
    tbl: Any, queries: np.ndarray, truth: list[set[str]], setting: dict[str, int]
) -> dict[str, Any]:
    for q in queries[:3]:
        lance_search(tbl, q, setting)
    lat, rec = [], []
    for q, want in zip(queries, truth, strict=True):
        t = time.perf_counter()
        got = lance_search(tbl, q, setting)
        lat.append((time.perf_counter() - t) * 1000)
        rec.append(len(want & set(got)) / K)
    return {**setting, "recall_at_10": round(float(np.mean(rec)), 4), **_pcts(lat)}


def candidates(n: int, dims: int, quick: bool) -> list[tuple[str, Any, list[dict[str, int]]]]:
    from lancedb.index import IvfHnswSq, IvfPq

    parts = max(1, min(int(n**0.5), n // 256))  # LanceDB trains at most n / 256
    sub = dims // 8
    pq_settings = [
        {"nprobes": p, "refine_factor": r}
        for p, r in ((32, 10), (32, 50), (64, 50), (128, 50), (parts // 2, 50))
    ]
    # HNSW partitions hold ~ n / parts rows each; fewer, bigger partitions suit HNSW.
    hnsw_parts = max(1, n // 100_000)
    hnsw_settings = [{"nprobes": hnsw_parts, "ef": ef} for ef in (50, 100, 200)] + [
        {"nprobes": hnsw_parts, "ef": 100, "refine_factor": 10}
    ]
    if quick:
        pq_settings = pq_settings[-2:]
    return [
        (
            f"IVF_PQ/partitions={parts}/sub_vectors={sub}",
            IvfPq(distance_type="cosine", num_partitions=parts, num_sub_vectors=sub),
            pq_settings,
        ),
        (
            f"IVF_HNSW_SQ/partitions={hnsw_parts}/m=20/ef_construction=300",
            IvfHnswSq(distance_type="cosine", num_partitions=hnsw_parts),
            hnsw_settings,
        ),
    ]


def bench_one(index: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    import lancedb
    import pyarrow as pa

    ids, mat, titles, sig = load_vectors(index, args.rows)
    rng = np.random.default_rng(args.seed)
    if args.query_source == "rows":
        # Held-out rows: the queries' own rows are not in the base.
        qrows = rng.choice(len(ids), size=min(args.queries, len(ids) // 10), replace=False)
        keep = np.ones(len(ids), dtype=bool)
        keep[qrows] = False
        queries = mat[qrows]
        base, base_ids = mat[keep], [i for i, k in zip(ids, keep, strict=True) if k]
    else:
        # Chapter titles embedded as queries (what the serving bench asks); the chapter
        # stays in the base, as it does when a user searches.
        from engine.config import EmbeddingConfig
        from engine.embedding import make_embedder

        sig = sig or {"provider": args.embedder}
        embedder = make_embedder(EmbeddingConfig(provider=sig["provider"]))
        pick = [i for i in rng.permutation(len(ids)) if titles[i]][: args.queries]
        queries = np.stack([embedder.embed_query(titles[i]) for i in pick]).astype(np.float32)
        queries /= np.maximum(np.linalg.norm(queries, axis=1, keepdims=True), 1e-12)
        base, base_ids = mat, ids
        sig = embedder.signature.to_dict()
    embedder_name = "/".join(str(sig.get(k, "")) for k in ("provider", "model", "dims"))
    del mat
    out: dict[str, Any] = {
        "index": index,
        "embedder": embedder_name,
        "query_source": args.query_source,
        "base_rows": len(base_ids),
        "dims": int(base.shape[1]),
        "queries": len(queries),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
    }
    truth, lat = [], []
    for q in queries:
        t = time.perf_counter()
        top = exact_top(base, q)
        lat.append((time.perf_counter() - t) * 1000)
        truth.append({base_ids[i] for i in top})
    out["numpy_exact_float32"] = {"recall_at_10": 1.0, **_pcts(lat)}
    db = lancedb.connect(str(work))
    dims = int(base.shape[1])
    table = pa.table(
        {
            "id": pa.array(base_ids, pa.string()),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(base.ravel(), pa.float32()), dims),
        }
    )
    del base
    tbl = db.create_table("ann", data=table, mode="overwrite")
    del table
    out["lance_flat"] = measure(tbl, queries[:20], truth[:20], {"flat": 1})
    results = []
    for name, config, settings in candidates(len(base_ids), dims, args.quick):
        if not any(name.startswith(k) for k in args.kinds.split(",")):
            continue
        sys.stderr.write(f"bench_ann: {name} ({time.strftime('%H:%M:%S')})\n")
        t = time.perf_counter()
        tbl.create_index("vector", config=config, replace=True)
        row: dict[str, Any] = {"index": name, "build_s": round(time.perf_counter() - t, 1)}
        row["settings"] = [measure(tbl, queries, truth, s) for s in settings]
        sys.stderr.write(json.dumps(row) + "\n")
        results.append(row)
    out["ann"] = results
    out["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    db.drop_table("ann")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--index", action="append", required=True)
    ap.add_argument("--rows", type=int, default=None)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="fewer IVF_PQ settings")
    ap.add_argument("--kinds", default="IVF_PQ,IVF_HNSW_SQ", help="index kinds to build")
    ap.add_argument("--query-source", choices=("titles", "rows"), default="titles")
    ap.add_argument("--embedder", default="hash", help="provider when the index has no manifest")
    ap.add_argument("--work", default=None, help="scratch folder (default: a temp folder)")
    ap.add_argument("--json")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="wikirag-ann-", dir=args.work))
    try:
        res = {"runs": [bench_one(i, args, work) for i in args.index]}
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(res, indent=2, ensure_ascii=False) + "\n"
    if args.json:
        from engine.atomic import atomic_write_text

        atomic_write_text(Path(args.json), text)
    print(text)


if __name__ == "__main__":
    main()
