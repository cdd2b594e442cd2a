"""`wikirag report`: HTML / Markdown / CSV / JSON report of a run, or TREC run/qrels files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from workbench.answer.llm import llm_settings
from workbench.commands.common import add_kb_args, add_run_arg, info, workspace
from workbench.commands.scorecard_cmd import load_run_by_id
from workbench.eval import golden
from workbench.eval.golden import GoldenSet
from workbench.eval.run_record import RunRecord, latest_run_record
from workbench.workspace import Workspace

# The registry's names (workbench/export/formats.py), listed here so `--help` stays cheap.
FORMATS = ("html", "md", "csv", "json", "trec-run", "trec-qrels")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a report of a run (latest by default)")
    add_kb_args(p, index=True, json=False)
    add_run_arg(p)
    p.add_argument("--format", default="html", choices=FORMATS)
    p.add_argument("--out", metavar="FILE", default=None, help="output file (default: stdout)")
    p.add_argument(
        "--no-scorecard",
        action="store_true",
        help="skip the scorecard (it loads the engine to gather its evidence)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workbench.export.formats import ExportSource, export_format, golden_qrels, render, write
    from workbench.export.report import build_report

    args.config = None
    ws = workspace(args)
    if args.run:
        record = load_run_by_id(ws, args.run)
    else:
        latest = latest_run_record(ws.runs_dir)
        if latest is None:
            raise EngineError(f"no run records in {ws.runs_dir}; run `wikirag eval` first")
        record = latest
    fmt = export_format(args.format)
    mode = record.modes[0]
    report = None
    if fmt.shows_report:
        card = _scorecard(ws, record) if fmt.shows_scorecard and not args.no_scorecard else None
        report = build_report(ws, record, scorecard=card, mode=mode)
    gs = _golden_for(ws, record) if fmt.name == "trec-qrels" else None
    source = ExportSource(record, mode, report, golden_qrels(gs) if gs is not None else None)
    if args.out:
        path = write(fmt.name, source, args.out)
        info(f"report: {path}" if fmt.shows_report else f"wrote {path}")
    else:
        sys.stdout.write(render(fmt.name, source))
    return 0


def _golden_for(ws: Workspace, record: RunRecord) -> GoldenSet | None:
    """The golden set file the run used (graded labels), if it is unchanged since."""

    path = Path(record.dataset.path or ws.dataset)
    try:
        gs = golden.load(path)
    except EngineError:
        return None
    return gs if gs.content_hash == record.dataset.hash else None


def _scorecard(ws: Workspace, record: RunRecord) -> Any:
    from workbench.tune.scorecard import compute_scorecard

    try:
        has_llm = llm_settings(record.config.llm) is not None
        return compute_scorecard(ws, record.config, run=record, llm_configured=has_llm)
    except (EngineError, OSError, ImportError) as exc:
        info(f"report without scorecard: {exc}")
        return None
