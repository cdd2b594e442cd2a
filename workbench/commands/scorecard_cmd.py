"""`wikirag scorecard`: nine weighted dimensions -> 0-100, a grade and the top weaknesses."""

from __future__ import annotations

import argparse
import sys

from workbench.answer.llm import llm_settings
from workbench.commands import common
from workbench.eval.run_record import RunRecord
from workbench.eval.saved_runs import load_run
from workbench.workspace import Workspace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scorecard", help="score the engine on 9 weighted dimensions (0-100)")
    common.add_workspace_args(p, dataset=True)
    common.add_run_arg(p, "score a saved run (default: evaluate now with the effective config)")
    common.add_json_arg(p)
    p.set_defaults(func=run)


def load_run_by_id(ws: Workspace, run_id: str) -> RunRecord:
    """A saved run by id or config label (``workbench.eval.saved_runs.load_run``)."""

    return load_run(ws.runs_dir, run_id)


def run(args: argparse.Namespace) -> int:
    from workbench.tune.scorecard import compute_scorecard

    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    ev_run = None
    if args.run:
        ev_run = load_run_by_id(ws, args.run)
        cfg = ev_run.config
    card = compute_scorecard(
        ws,
        cfg,
        run=ev_run,
        progress=lambda i, n, what: common.info(f"[{i}/{n}] {what}"),
        llm_configured=llm_settings(cfg.llm) is not None,
    )
    if args.json:
        common.print_json(card.to_dict())
    else:
        sys.stdout.write(card.to_markdown())
    return 0
