"""`wikirag serve` (HTTP API) and `wikirag mcp` (MCP server): the tuned engine for other tools."""

from __future__ import annotations

import argparse

from workbench.commands.common import (
    add_log_args,
    add_workspace_args,
    effective_config,
    info,
    workspace,
)
from workbench.eval.query_log import query_log_for
from workbench.serve.http_guard import allowed_hosts


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the engine over HTTP (FastAPI: /search, /chapter, /ask, docs at /docs)",
        description=(
            "Serve the KB's accepted baseline config (or --config) over HTTP. Admin endpoints "
            "are enabled only when WIKIRAG_ADMIN_TOKEN is set, and then need it as a bearer "
            "token. Only requests naming localhost / 127.0.0.1 / ::1 (or --allow-host) in their "
            "Host header are served."
        ),
    )
    add_workspace_args(p)
    p.add_argument("--host", default="127.0.0.1", help="bind address (default: 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default: 8000)")
    _add_allow_host(p)
    p.add_argument(
        "--max-concurrent",
        type=int,
        default=None,
        metavar="N",
        help="searches computed at once; more wait for a slot (default: CPU count; 0: no cap)",
    )
    add_log_args(p)
    p.set_defaults(func=_serve)

    m = sub.add_parser(
        "mcp",
        help="serve the engine to MCP clients (Claude Desktop, Cursor): stdio or HTTP",
        description=(
            "MCP server with tools search_knowledge, get_chapter, ask and the KB's documents "
            "as wiki://<doc_id> resources. Default transport: stdio."
        ),
    )
    add_workspace_args(m)
    how = m.add_mutually_exclusive_group()
    how.add_argument("--stdio", action="store_true", help="serve over stdin/stdout (default)")
    how.add_argument(
        "--http", type=int, default=None, metavar="PORT", help="serve streamable HTTP at /mcp"
    )
    m.add_argument("--host", default="127.0.0.1", help="bind address for --http")
    _add_allow_host(m)
    add_log_args(m)
    m.set_defaults(func=_mcp)


def _add_allow_host(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="also serve requests whose Host header is NAME (repeatable; '*' allows any, "
        "e.g. behind a trusted reverse proxy). Default: localhost names and the bind address",
    )


def _serve(args: argparse.Namespace) -> int:
    from workbench.serve.app import create_app, run_server  # deferred: loads lancedb (~2 s)

    ws = workspace(args)
    cfg = effective_config(args, ws)
    source = ws.config_path or "built-in defaults"
    info(f"wikirag serve: KB {ws.kb}, index {ws.index}, config {source} ({cfg.hash})")
    allowed = allowed_hosts(args.allow_host, bind=args.host)
    log = query_log_for(ws.index, args.log_queries or None, args.log_retention_days)
    if log is not None:
        info(f"logging questions (no answers) to {log.path}, kept {log.retention_days} days")
    app = create_app(ws, cfg, max_concurrent=args.max_concurrent, allowed=allowed, query_log=log)
    run_server(app, host=args.host, port=args.port)
    return 0


def _mcp(args: argparse.Namespace) -> int:
    from workbench.serve.mcp import (  # deferred: loads lancedb (~2 s)
        open_mcp_server,
        quiet_stdout,
        run_http,
        run_stdio,
    )

    with quiet_stdout():
        ws = workspace(args)
        cfg = effective_config(args, ws)
        info(
            f"wikirag mcp: KB {ws.kb}, index {ws.index}, "
            f"config {ws.config_path or 'built-in defaults'} ({cfg.hash})"
        )
        log = query_log_for(ws.index, args.log_queries or None, args.log_retention_days)
    server = open_mcp_server(ws, cfg, query_log=log)
    if args.http is not None:
        run_http(server, host=args.host, port=args.http, allow=args.allow_host)
    else:
        run_stdio(server)
    return 0
