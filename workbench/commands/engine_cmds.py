"""`wikirag index`, `wikirag search`, `wikirag chapter`, `wikirag stats`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.config import EXPAND_MODES
from engine.errors import EngineError
from engine.parse_cache import ParseCache
from engine.tree import parse_kb
from workbench.commands import common
from workbench.progress import StderrBar

# Parsed documents of the last `wikirag index`, in the index folder (a dot file: index
# listings and stale-file clean-up skip it).
PARSE_CACHE = ".parse_cache.pkl"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="build or update the search index of a KB")
    common.add_workspace_args(p)
    _storage_arg(p)
    p.add_argument("--force", action="store_true", help="re-embed everything (full rebuild)")
    common.add_json_arg(p, "print the report as JSON")
    p.add_argument(
        "--ray",
        nargs="?",
        const="local",
        default=None,
        metavar="ADDRESS",
        help="full build on Ray: no ADDRESS = a local Ray, 'auto' or ray://HOST:PORT = a "
        "cluster (default: index.ray_address; needs the ray extra)",
    )
    p.set_defaults(func=_index)

    p = sub.add_parser("search", help="search the KB (hybrid, vector or keyword)")
    p.add_argument("query", help="the question or keywords")
    common.add_workspace_args(p)
    _storage_arg(p)
    common.add_search_mode_arg(p)
    p.add_argument("--top-k", type=int, default=None, metavar="N")
    common.add_rerank_arg(p)
    p.add_argument(
        "--filter",
        dest="filters",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="category, priority, doc_type or keywords; VALUE may be a,b (any of); repeatable",
    )
    p.add_argument("--expand", choices=EXPAND_MODES, default=None)
    common.add_json_arg(p, "print the SearchResponse as JSON")
    p.set_defaults(func=_search)

    p = sub.add_parser("chapter", help="show one chapter (node) of the KB")
    p.add_argument("node_id")
    common.add_workspace_args(p)
    rel = p.add_mutually_exclusive_group()
    rel.add_argument("--children", action="store_true", help="list its children instead")
    rel.add_argument("--siblings", action="store_true", help="list its siblings instead")
    common.add_json_arg(p, None)
    p.set_defaults(func=_chapter)

    p = sub.add_parser("stats", help="KB and index size, embedder, index freshness")
    common.add_workspace_args(p)
    _storage_arg(p)
    common.add_json_arg(p, None)
    p.set_defaults(func=_stats)


def _storage_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--storage-option",
        dest="storage_options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="LanceDB storage option for an object-store --index URI (repeatable)",
    )


def _storage(args: argparse.Namespace) -> dict[str, str]:
    out = {}
    for item in args.storage_options or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise EngineError(f"expected --storage-option KEY=VALUE, got {item!r}")
        out[key.strip()] = value
    return out


def parse_filters(items: list[str]) -> dict[str, list[str]]:
    """``["category=rag", "keywords=a,b"]`` -> {"category": ["rag"], "keywords": ["a", "b"]}."""
    out: dict[str, list[str]] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip() or not value.strip():
            raise EngineError(f"expected --filter KEY=VALUE (e.g. category=rag), got {item!r}")
        values = [v.strip() for v in value.replace("，", ",").split(",") if v.strip()]
        out.setdefault(key.strip(), []).extend(values)
    return out


def _index(args: argparse.Namespace) -> int:
    from engine.indexer import build_index  # deferred: loads lancedb (~2 s)
    from engine.store import is_local  # deferred: loads lancedb (~2 s)

    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    address = args.ray if args.ray is not None else cfg.index.ray_address
    if address:
        return _index_on_ray(args, ws, cfg, address)
    # A local index keeps the parsed documents beside it, so the next `wikirag index`
    # parses only the files that changed.
    cache_file = Path(ws.index) / PARSE_CACHE if is_local(str(ws.index)) else None
    cache = ParseCache.load(cache_file) if cache_file is not None else ParseCache()
    kb = parse_kb(ws.kb, cache=cache)
    progress = StderrBar(unit="item")
    try:
        report = build_index(
            kb,
            cfg,
            str(ws.index),
            progress,
            force=args.force,
            storage_options=_storage(args) or None,
        )
    finally:
        progress.close()
    if cache_file is not None:
        cache.save(cache_file)
    _print_report(args, str(ws.index), report)
    return 0


def _index_on_ray(args: argparse.Namespace, ws: Any, cfg: Any, address: str) -> int:
    from engine.ray_build import build_index_ray

    progress = StderrBar(unit="item")
    try:
        report = build_index_ray(
            ws.kb,
            cfg,
            str(ws.index),
            address,
            progress,
            force=args.force,
            storage_options=_storage(args) or None,
        )
    finally:
        progress.close()
    _print_report(args, str(ws.index), report)
    return 0


def _print_report(args: argparse.Namespace, index: str, report: Any) -> None:
    for w in report.warnings:
        common.info(f"warning: {w}")
    if args.json:
        common.print_json(report.to_dict())
    else:
        sys.stdout.write(f"{index}: {report.summary()}\n")


def _open(args: argparse.Namespace) -> Any:
    from engine.search import Engine  # deferred: loads lancedb (~2 s)

    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    return Engine.open(ws.kb, str(ws.index), cfg, _storage(args) or None)


def _search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise EngineError("query is empty; pass a question or keywords to search for")
    engine = _open(args)
    # Load models first so the stage timings below describe the query, not start-up.
    engine.warm_up()
    resp = engine.search(
        args.query,
        top_k=args.top_k,
        mode=args.mode,
        rerank=args.rerank,
        filters=parse_filters(args.filters) or None,
        expand=args.expand,
    )
    for w in resp.warnings:
        common.info(f"warning: {w}")
    if args.json:
        common.print_json(resp.to_dict())
        return 0
    out = sys.stdout
    if not resp.results:
        out.write("no results\n")
    for i, r in enumerate(resp.results, 1):
        src = " · ".join(
            f"{k} #{v}" if v is not None else f"{k} -" for k, v in r.rank_source.items()
        )
        if r.injected_from:
            src = f"injected from {r.injected_from}"
        out.write(f"{i:>2}. {r.score:.4f}  {r.node_id}\n")
        out.write(
            f"    {' > '.join(r.breadcrumb)}  ({r.metadata['file_path']}:{r.metadata['line']})\n"
        )
        out.write(f"    {src}\n")
        if r.summary:
            out.write(f"    {_clip(r.summary, 160)}\n")
        for e in r.expanded:
            out.write(f"      {e['relation']}: {e['node_id']}  {e['title']}\n")
    if resp.expansion_terms:
        out.write(f"expansion: {', '.join(resp.expansion_terms)}\n")
    if resp.bm25_scale != 1.0:
        out.write(
            f"cross-lingual question: keyword channel weight x {resp.bm25_scale:g} "
            "(fusion.cross_lingual_bm25)\n"
        )
    stages = " · ".join(f"{k} {v:.1f}" for k, v in resp.timings.items())
    out.write(
        f"{len(resp.results)} of {resp.total} candidates in {resp.took_ms:.1f} ms "
        f"({stages} ms) · config {resp.config_hash}\n"
    )
    return 0


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _chapter(args: argparse.Namespace) -> int:
    from engine.response import (  # deferred: loads lancedb (~2 s)
        lookup_node,
        node_metadata,
        node_record,
    )

    ws = common.workspace(args)
    kb = parse_kb(ws.kb)
    node = lookup_node(kb, args.node_id)
    if args.children or args.siblings:
        nodes = kb.children(node.node_id) if args.children else kb.siblings(node.node_id)
        if args.json:
            common.print_json([node_record(n) for n in nodes])
        else:
            for n in nodes:
                sys.stdout.write(f"{n.node_id}\t{n.title}\n")
        return 0
    if args.json:
        common.print_json(node_record(node))
        return 0
    meta = node_metadata(node)
    sys.stdout.write(
        f"{' > '.join(node.breadcrumb)}\n{node.node_id}  ({meta['file_path']}:{meta['line']}, "
        f"level {node.level}, {len(node.children_ids)} children)\n\n{node.content}\n"
    )
    return 0


def _stats(args: argparse.Namespace) -> int:
    stats = _open(args).stats()
    if args.json:
        common.print_json(stats)
        return 0
    idx, fr, emb = stats["index"], stats["freshness"], stats["embedder"]
    state = (
        "up to date"
        if fr["fresh"]
        else f"stale: {fr['new']} new, {fr['changed']} changed, {fr['deleted']} deleted "
        "(run `wikirag index`)"
    )
    sys.stdout.write(
        f"KB {stats['kb']}: {stats['documents']} documents, {stats['chapters']} chapters\n"
        f"index {idx['uri']}: {idx['rows']} rows, table {idx['table']} v{idx['version']}, "
        f"updated {idx['updated_at']}\n"
        f"embedder {emb['provider']}/{emb['model']}/{emb['dims']}; "
        f"{idx['vocabulary_terms']} expansion terms\n"
        f"freshness: {state}\n"
    )
    return 0
