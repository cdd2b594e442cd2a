"""`wikirag bench`: index/query/exactness/memory benchmark into a fresh temp index (JSON out)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.atomic import atomic_write_text
from engine.config import EngineConfig
from engine.errors import EngineError
from workbench.commands import common


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench",
        help="benchmark indexing, query latency, exactness and memory (fresh temp index)",
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument("--kb", default=None, help="KB folder to benchmark (copied to a temp folder)")
    src.add_argument(
        "--synthetic",
        type=int,
        default=None,
        metavar="N",
        help="generate N chapters of pseudo-Chinese/English text (fixed seed) instead",
    )
    p.add_argument("--config", default=None, help="engine config YAML (default: built-in)")
    common.add_set_arg(p, example="embedding.provider=hash")
    p.add_argument(
        "--queries",
        default=None,
        metavar="FILE|N",
        help="golden set YAML or text file (one query a line), or a number of sampled queries "
        "(default: 200 chapter titles/first sentences sampled with a fixed seed)",
    )
    p.add_argument("--rerank-queries", type=int, default=20, metavar="N")
    p.add_argument("--bm25-sample", type=int, default=20000, metavar="N")
    p.add_argument(
        "--limit-docs",
        type=int,
        default=None,
        metavar="N",
        help="--kb: only the first N Markdown files (path order)",
    )
    p.add_argument(
        "--rescore",
        action="store_true",
        help="with --queries GOLDEN.yaml: also time cached re-scoring (1,000 queries, an "
        "experiment and a 25-point sweep on 100)",
    )
    p.add_argument("--seed", type=int, default=20250101)
    p.add_argument("--work-dir", default=None, help="parent of the temp folder (default: /tmp)")
    p.add_argument("--keep", action="store_true", help="keep the temp KB and index")
    p.add_argument(
        "--json", default="-", metavar="OUT", help="write the result here (default: stdout)"
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    import os

    # LanceDB's Rust logger warns on every hybrid sub-query about score columns; quiet it.
    os.environ.setdefault("LANCEDB_LOG", "error")
    from workbench.bench.run import run_bench  # deferred: loads lancedb (~2 s)

    if args.kb is None and args.synthetic is None:
        args.kb = "wiki"
    cfg = common.with_set(EngineConfig.load(args.config) if args.config else EngineConfig(), args)
    raw: str | None = args.queries  # a count, a golden set or a query file
    queries: str | int | None = int(raw) if raw is not None and raw.isdigit() else raw
    golden_path = raw if raw is not None and raw.endswith((".yaml", ".yml")) else None
    if args.rescore and golden_path is None:
        raise EngineError("--rescore needs --queries GOLDEN.yaml (a golden set with relevant ids)")
    if args.kb is not None and not Path(args.kb).is_dir():
        raise EngineError(f"knowledge base folder {args.kb} not found; pass --kb DIR")
    result = run_bench(
        cfg,
        kb=args.kb,
        synthetic=args.synthetic,
        queries=queries,
        rerank_queries=args.rerank_queries,
        bm25_sample=args.bm25_sample,
        limit_docs=args.limit_docs,
        seed=args.seed,
        work_dir=args.work_dir,
        keep=args.keep,
        rescore_dataset=golden_path if args.rescore else None,
        log=common.info,
    )
    text = json.dumps(result, ensure_ascii=False, indent=1, default=str)
    if args.json == "-":
        sys.stdout.write(text + "\n")
    else:
        atomic_write_text(Path(args.json), text + "\n")
        common.info(f"bench: wrote {args.json}")
    return 0
