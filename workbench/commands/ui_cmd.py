"""`wikirag ui`: open the Streamlit workbench on 127.0.0.1."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from engine.errors import EngineError
from workbench.commands import common

APP = Path(__file__).resolve().parent.parent / "ui" / "app.py"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("ui", help="open the workbench in the browser (Streamlit, 127.0.0.1)")
    common.add_kb_arg(p)
    common.add_index_arg(p)
    p.add_argument("--config", default=None, help="engine config YAML (default: the baseline)")
    common.add_dataset_arg(p)
    p.add_argument("--experiments", default=None, help="experiments root (default: experiments)")
    p.add_argument("--port", type=int, default=8501, help="port on 127.0.0.1 (default 8501)")
    p.add_argument(
        "--lang",
        choices=["zh", "en"],
        default=None,
        help="UI language (default: WIKIRAG_LANG, else the system locale, else English)",
    )
    p.set_defaults(func=run)


def streamlit_argv(args: argparse.Namespace, server_options: Sequence[str] = ()) -> list[str]:
    """The full `streamlit run` command line; ``server_options`` (more Streamlit flags, e.g.
    ``--server.fileWatcherType none`` for the screenshot script and browser tests) go before
    `--`, app options after it."""
    argv = [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.address",
        "127.0.0.1",
        "--server.port",
        str(args.port),
        "--server.headless",
        "true",
        "--browser.gatherUsageStats",
        "false",
        *server_options,
        "--",
        "--kb",
        str(args.kb),
    ]
    for name in ("index", "config", "dataset", "experiments", "lang"):
        value = getattr(args, name, None)
        if value:
            argv += [f"--{name}", str(value)]
    return argv


def run(args: argparse.Namespace) -> int:
    if not Path(args.kb).is_dir():
        raise EngineError(f"knowledge base folder {args.kb} not found; pass --kb DIR")
    argv = streamlit_argv(args)
    sys.stderr.write(f"WikiRAG Workbench on http://127.0.0.1:{args.port}  (Ctrl+C to stop)\n")
    sys.stderr.flush()
    os.execv(argv[0], argv)  # replaces this process: Ctrl+C goes straight to Streamlit
    return 0  # pragma: no cover
