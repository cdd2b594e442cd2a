"""`wikirag compare` (2-4 configs side by side) and `wikirag sweep` (a 1-2 key grid)."""

from __future__ import annotations

import argparse
import sys

from engine.atomic import atomic_write_text
from workbench.commands import common
from workbench.eval import golden
from workbench.tune.sweep import format_sweep, parse_grid_arg, sweep


def register(sub: argparse._SubParsersAction) -> None:
    c = sub.add_parser(
        "compare",
        help="compare 2-4 configs on one golden set (deltas, paired tests, per-query changes)",
    )
    c.add_argument(
        "configs",
        nargs="+",
        metavar="CONFIG",
        help="a YAML path, `baseline`, `defaults`, `vN` (accepted version), or any of them "
        "plus overrides: `baseline+fusion.k=30,rerank.weight=0.5`",
    )
    common.add_kb_arg(c)
    common.add_index_arg(c)
    common.add_dataset_arg(c)
    common.add_split_arg(c)
    common.add_search_mode_arg(c, "each config's search.mode")
    common.add_json_arg(c)
    c.add_argument("--md", metavar="OUT", default=None, help="also write the Markdown to OUT")
    c.set_defaults(func=_compare)

    s = sub.add_parser("sweep", help="evaluate a grid over 1-2 config keys (tune + holdout)")
    common.add_workspace_args(s, dataset=True)
    s.add_argument(
        "--grid",
        action="append",
        required=True,
        metavar="KEY=v1,v2,...",
        help="a key and its values, e.g. --grid fusion.k=10,30,60 (once or twice)",
    )
    common.add_split_arg(s, "tune")
    common.add_json_arg(s)
    s.add_argument("--csv", metavar="OUT", default=None, help="also write the table as CSV")
    s.set_defaults(func=_sweep)


def _compare(args: argparse.Namespace) -> int:
    from workbench.tune.compare import compare_configs, parse_config_spec

    if not 2 <= len(args.configs) <= 4:
        raise ValueError(f"compare takes 2 to 4 configs; got {len(args.configs)}")
    args.config = None
    ws = common.workspace(args)
    configs = [parse_config_spec(s, ws) for s in args.configs]
    gs = golden.load(ws.dataset)
    cmp = compare_configs(
        ws,
        configs,
        gs,
        split=args.split,
        mode=args.mode,
        progress=lambda i, n, label: common.info(f"[{i}/{n}] {label}"),
    )
    md = cmp.to_markdown()
    if args.md:
        from pathlib import Path

        atomic_write_text(Path(args.md), md)
        common.info(f"markdown: {args.md}")
    if args.json:
        common.print_json(cmp.to_dict())
    else:
        sys.stdout.write(md)
    return 0


def _sweep(args: argparse.Namespace) -> int:
    ws = common.workspace(args)
    base = common.effective_config(args, ws)
    grid = dict(parse_grid_arg(g) for g in args.grid)
    if len(grid) != len(args.grid):
        raise ValueError("each --grid needs a different key")
    gs = golden.load(ws.dataset)
    result = sweep(
        ws, base, grid, gs, split=args.split, progress=lambda i, n, p: common.info(f"[{i}/{n}] {p}")
    )
    if args.csv:
        from pathlib import Path

        from workbench.export.formats import rows_csv

        atomic_write_text(Path(args.csv), rows_csv(result.rows()))
        common.info(f"csv: {args.csv}")
    if args.json:
        common.print_json(result.to_dict())
    else:
        sys.stdout.write(format_sweep(result))
    return 0
