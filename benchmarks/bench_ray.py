"""Full index build on Ray (``wikirag index --ray``) beside the single-process build.

    nice -n 10 python benchmarks/bench_ray.py --synthetic 20000 \\
        [--set embedding.provider=hash] [--num-cpus N] [--json benchmarks/results/bench_ray_20k.json]

Both builds index the same synthetic KB (``wikirag bench --synthetic``'s generator, same
seed) into fresh folders, one after the other in one run, so their ratio is what to read
(the machine may be shared: the load average is recorded before and after). The
single-process figure includes parsing (the Ray build parses on Ray). The Ray figure is
split into starting the local Ray instance and the build itself, and the two indexes are
checked to be the same (ids, hashes, tokens, manifest, BM25 counts; vectors within 1e-6).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from engine.atomic import atomic_write_text
from engine.config import EngineConfig, parse_override
from engine.embedding import make_embedder
from engine.index_caches import current_title_terms, split_lexical_payload
from engine.indexer import build_index
from engine.manifest import read_manifest
from engine.store import Location, Store, vectors_of
from engine.tree import parse_kb
from workbench.bench.measure import load_avg, peak_rss_mb
from workbench.bench.synthetic import synthetic_kb


def _same_index(a: Path, b: Path) -> dict[str, Any]:
    """What matches between two built indexes (everything, when the Ray build is right)."""
    ma, mb = read_manifest(Location(str(a))), read_manifest(Location(str(b)))
    assert ma is not None and mb is not None
    ta = Store.read(Store(str(a)).open_table(ma.table, ma.version))
    tb = Store.read(Store(str(b)).open_table(mb.table, mb.version))
    cols = [c for c in ta.column_names if c != "vector"]
    la, lb = Location(str(a)), Location(str(b))
    ids_a, _ = split_lexical_payload(la.read_bytes(ma.lexical_file) or b"")
    ids_b, _ = split_lexical_payload(lb.read_bytes(mb.lexical_file) or b"")
    diff = np.abs(vectors_of(ta) - vectors_of(tb)) if ta.num_rows == tb.num_rows else None
    return {
        "rows_equal_except_vector": ta.select(cols).equals(tb.select(cols)),
        "max_vector_diff": None if diff is None else float(diff.max(initial=0.0)),
        "manifest_nodes_equal": ma.nodes == mb.nodes,
        "manifest_files_equal": ma.files == mb.files,
        "title_terms_equal": current_title_terms(la, ma) == current_title_terms(lb, mb),
        "bm25_ids_equal": ids_a == ids_b,
        "vocab_terms_equal": la.read_text(ma.vocab_terms_file) == lb.read_text(mb.vocab_terms_file),
    }


def run(n: int, cfg: EngineConfig, num_cpus: int | None, work: Path) -> dict[str, Any]:
    import ray

    from engine.ray_build import build_index_ray

    out: dict[str, Any] = {"load_avg_start": load_avg(), "cpus": os.cpu_count()}
    kb = work / "kb"
    out["kb"] = synthetic_kb(kb, n)
    embedder = make_embedder(cfg.embedding)
    embedder.embed_documents(["warm up"])
    sig = embedder.signature
    out["embedder"] = f"{sig.provider}/{sig.model}/{sig.dims}"

    t = time.perf_counter()
    kbase = parse_kb(kb)
    parse_s = time.perf_counter() - t
    report = build_index(kbase, cfg, str(work / "single"), embedder=embedder)
    out["single"] = {
        "parse_s": round(parse_s, 3),
        "index_s": round(report.seconds, 3),
        "total_s": round(time.perf_counter() - t, 3),
        "rows": report.rows,
        "peak_rss_mb": peak_rss_mb(),
    }
    del kbase
    out["load_avg_between"] = load_avg()

    t = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    init_s = time.perf_counter() - t
    try:
        cpus = int(ray.cluster_resources().get("CPU", 0))
        t = time.perf_counter()
        rep = build_index_ray(kb, cfg, str(work / "ray"), embedder=embedder)
        out["ray"] = {
            "ray_init_s": round(init_s, 3),
            "total_s": round(time.perf_counter() - t, 3),
            "rows": rep.rows,
            "cluster_cpus": cpus,
            "driver_peak_rss_mb": peak_rss_mb(),
        }
    finally:
        ray.shutdown()
    out["load_avg_end"] = load_avg()
    out["ray_over_single"] = round(out["ray"]["total_s"] / out["single"]["total_s"], 2)
    out["same_index"] = _same_index(work / "single", work / "ray")
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--synthetic", type=int, default=20000, metavar="N")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs of the local Ray")
    ap.add_argument("--json", default=None, metavar="OUT")
    args = ap.parse_args(argv)
    os.environ.setdefault("LANCEDB_LOG", "error")
    cfg = EngineConfig().with_overrides(dict(parse_override(s) for s in args.overrides))
    with tempfile.TemporaryDirectory(prefix="bench_ray_") as tmp:
        result = run(args.synthetic, cfg, args.num_cpus, Path(tmp))
    result.update(
        synthetic=args.synthetic,
        overrides=args.overrides,
        python=platform.python_version(),
        date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    )
    text = json.dumps(result, ensure_ascii=False, indent=1)
    if args.json:
        atomic_write_text(Path(args.json), text + "\n")
    sys.stdout.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
