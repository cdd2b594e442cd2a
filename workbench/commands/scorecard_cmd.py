"""`wikirag scorecard`: nine weighted dimensions -> 0-100, a grade and the top weaknesses."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.errors import EngineError
from workbench.commands import common
from workbench.eval.run_record import RunRecord
from workbench.workspace import Workspace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("scorecard", help="score the engine on 9 weighted dimensions (0-100)")
    common.add_workspace_args(p, dataset=True)
    common.add_run_arg(p, "score a saved run (default: evaluate now with the effective config)")
    common.add_json_arg(p)
    p.set_defaults(func=run)


def load_run_by_id(ws: Workspace, run_id: str) -> RunRecord:
    """The run record ``experiments/<kb>/runs/<ID>.json``; a clear error when absent."""
    from workbench.eval.evaluate import list_runs
    from workbench.eval.run_record import load_run_record

    path = Path(ws.runs_dir) / f"{Path(run_id).stem}.json"
    if not path.is_file():
        known = ", ".join(p.stem for p in list_runs(ws.runs_dir)[:5]) or "none"
        raise EngineError(
            f"no run record {path}; latest runs: {known} (run `wikirag eval` to make one)"
        )
    return load_run_record(path)


def run(args: argparse.Namespace) -> int:
    from workbench.answer.llm import llm_settings
    from workbench.tune.scorecard import compute_scorecard

    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    ev_run = None
    if args.run:
        ev_run = load_run_by_id(ws, args.run).to_run()
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
