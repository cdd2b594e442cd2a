"""`wikirag report`: HTML / Markdown / CSV / JSON report of a run, or TREC run/qrels files."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.atomic import atomic_write_text
from engine.errors import EngineError
from workbench.commands.common import info, workspace

FORMATS = ("html", "md", "csv", "json", "trec-run", "trec-qrels")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a report of a run (latest by default)")
    p.add_argument("--kb", default="wiki", help="knowledge base folder (default: wiki)")
    p.add_argument("--index", default=None, help="index folder (default: .wikirag/<kb>)")
    p.add_argument("--dataset", default=None, help="golden set (default: datasets/<kb>.yaml)")
    p.add_argument("--run", metavar="ID", default=None, help="run record id (default: latest)")
    p.add_argument("--format", default="html", choices=FORMATS)
    p.add_argument("--out", metavar="FILE", default=None, help="output file (default: stdout)")
    p.add_argument(
        "--no-scorecard",
        action="store_true",
        help="skip the scorecard (it loads the engine to gather its evidence)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workbench.commands.scorecard_cmd import load_run_by_id
    from workbench.eval.evaluate import latest_run_record, trec_qrels_lines, trec_run_lines
    from workbench.export.report import (
        build_report,
        golden_from_record,
        run_from_record,
        write_report,
    )

    args.config = None
    ws = workspace(args)
    if args.run:
        record = load_run_by_id(ws, args.run)
    else:
        record = latest_run_record(ws.runs_dir)
        if record is None:
            raise EngineError(f"no run records in {ws.runs_dir}; run `wikirag eval` first")
    if args.format in ("trec-run", "trec-qrels"):
        ev_run = run_from_record(record)
        if args.format == "trec-run":
            lines = trec_run_lines(ev_run, ev_run.modes[0])
        else:
            lines = trec_qrels_lines(_golden_for(ws, record) or golden_from_record(record))
        _emit("\n".join(lines) + "\n", args.out)
        return 0
    card = None
    if not args.no_scorecard and args.format != "csv":
        card = _scorecard(ws, record)
    report = build_report(ws, record, scorecard=card)
    if args.out:
        path = write_report(report, args.format, args.out)
        info(f"report: {path}")
    else:
        from workbench.export.report import render_csv, render_html, render_json, render_markdown

        render = {"html": render_html, "md": render_markdown, "csv": render_csv}
        sys.stdout.write(render.get(args.format, render_json)(report))
    return 0


def _golden_for(ws, record):
    """The golden set file the run used (graded labels), if it is unchanged since."""
    from workbench.eval import golden

    path = Path(record.get("dataset", {}).get("path") or ws.dataset)
    try:
        gs = golden.load(path)
    except EngineError:
        return None
    return gs if gs.content_hash == record.get("dataset", {}).get("hash") else None


def _scorecard(ws, record):
    from workbench.export.report import run_from_record
    from workbench.tune.scorecard import compute_scorecard

    ev_run = run_from_record(record)
    try:
        return compute_scorecard(ws, ev_run.config, run=ev_run)
    except (EngineError, OSError, ImportError) as exc:
        info(f"report without scorecard: {exc}")
        return None


def _emit(text: str, out: str | None) -> None:
    if out:
        atomic_write_text(Path(out), text)
        info(f"wrote {out}")
    else:
        sys.stdout.write(text)
