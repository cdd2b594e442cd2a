"""`wikirag config show|keys`."""

from __future__ import annotations

import argparse
import sys

from engine.config import all_keys
from workbench.commands.common import (
    add_json_arg,
    add_workspace_args,
    effective_config,
    print_json,
    workspace,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("config", help="show the effective engine config")
    csub = p.add_subparsers(dest="config_command", metavar="ACTION")
    show = csub.add_parser("show", help="print the effective config as YAML")
    add_workspace_args(show)
    add_json_arg(show, None)
    show.set_defaults(func=_show)
    keys = csub.add_parser("keys", help="list every config key")
    keys.set_defaults(func=lambda a: print("\n".join(all_keys())))
    p.set_defaults(func=lambda a: p.print_help())


def _show(args: argparse.Namespace) -> int:
    ws = workspace(args)
    cfg = effective_config(args, ws)
    if args.json:
        print_json(
            {"config": cfg.to_dict(), "hash": cfg.hash, "source": str(ws.config_path or "defaults")}
        )
    else:
        sys.stdout.write(
            f"# config hash {cfg.hash} (from {ws.config_path or 'built-in defaults'})\n"
        )
        sys.stdout.write(cfg.to_yaml())
    return 0
