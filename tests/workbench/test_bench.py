"""`wikirag bench`: runs end to end on a small synthetic KB and writes every key (no timing asserts)."""

from __future__ import annotations

import json
from pathlib import Path

from workbench.bench.measure import overlap, percentiles, top_ids
from workbench.bench.run import REQUIRED_KEYS
from workbench.bench.synthetic import synthetic_kb
from workbench.bench.targets import targets
from workbench.cli import main


def test_bench_synthetic_writes_every_key(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    rc = main(
        [
            "bench",
            "--synthetic",
            "300",
            "--set",
            "embedding.provider=hash",
            "--queries",
            "20",
            "--rerank-queries",
            "0",
            "--work-dir",
            str(tmp_path),
            "--json",
            str(out),
        ]
    )
    assert rc == 0
    data = json.loads(out.read_text(encoding="utf-8"))
    missing = [k for k in REQUIRED_KEYS if k not in data]
    assert not missing, missing
    assert data["chapters"] == 300
    assert data["queries"] == 20
    assert data["embedder"].startswith("hash/")
    assert data["index_incremental_report"]["embedded"] >= 1
    assert not data["index_incremental_report"]["full_rebuild"]
    for mode in ("vector", "keyword", "hybrid", "peer_lancedb_hybrid"):
        assert data[f"{mode}_p50_ms"] is not None
    # Exact by construction: the vector channel is a numpy mat-vec over the stored vectors,
    # and the sparse BM25 uses rank_bm25's formulas.
    assert data["vector_exact_agreement_top10"] == 1.0
    assert data["bm25_rank_bm25_agreement_top10"] == 1.0
    assert set(data["targets"]) and all("met" in t for t in data["targets"].values())
    # Serving memory comes from a fresh process that opened the index and answered queries.
    assert data["serving_rss_mb"] > 50 and data["serving_hybrid_p95_ms"] is not None
    assert data["parse_incremental_files"] == {"parsed": 1, "reused": data["documents"] - 1}
    assert not list(tmp_path.glob("wikirag-bench-*")), "the temp KB and index are removed"


def test_synthetic_kb_is_deterministic(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    assert synthetic_kb(a, 25, seed=3) == synthetic_kb(b, 25, seed=3)
    fa = sorted(p.relative_to(a).as_posix() for p in a.rglob("*.md"))
    assert fa == sorted(p.relative_to(b).as_posix() for p in b.rglob("*.md"))
    assert all((a / f).read_bytes() == (b / f).read_bytes() for f in fa)


def test_helpers() -> None:
    import numpy as np

    assert percentiles([]) == {"p50": None, "p95": None, "n": 0}
    p = percentiles([float(x) for x in range(1, 101)])
    assert (
        p["p50"] == 50.5 and p["p95"] == 95.05
    )  # linear (percentiles.percentile), not nearest-rank
    assert top_ids(np.array([0.5, 0.9, 0.9, 0.0]), ["d", "c", "b", "a"], 2) == ["b", "c"]
    assert top_ids(np.array([0.0, 1.0]), ["x", "y"], 5, positive=True) == ["y"]
    # recall@k of an approximate list against the exact one (the ANN benches use it)
    assert overlap(["a", "b", "x", "y"], ["a", "b", "c", "d"]) == 0.5
    assert overlap(["d", "c", "b", "a"], ["a", "b", "c", "d"]) == 1.0
    assert overlap(["a"], []) is None
    t = targets({"hybrid_p95_ms": 50.0, "index_full_s": 10.0, "embed_only_s": 9.0})
    assert t["hybrid_p95_ms <= 100"]["met"] is True
    assert t["index_full_s <= 1.3 x embed_only_s"]["met"] is True
    assert t["peak_rss_mb <= 2048"]["met"] is None
    assert t["non_embedding_s_per_1k <= 0.5"]["met"] is None  # no chapter count
    t = targets({"index_full_s": 60.0, "embed_only_s": 20.0, "chapters": 100_000})
    assert t["non_embedding_s_per_1k <= 0.5"]["value"] == 0.4
