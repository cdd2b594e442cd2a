"""`wikirag failures` (failing queries worst first) and `wikirag runs diff` (saved runs
compared query by query): the Evaluate and Compare pages' per-query views, headless."""

from __future__ import annotations

import argparse
import sys

from engine.errors import EngineError
from workbench.commands import common
from workbench.commands.scorecard_cmd import load_run_by_id
from workbench.eval import analysis as A
from workbench.eval.analysis import OUTCOMES, SLICES
from workbench.eval.attribution import CAUSES
from workbench.eval.causes import rank_text
from workbench.eval.run_record import RunRecord, latest_run_record
from workbench.eval.saved_runs import list_saved_runs


def register(sub: argparse._SubParsersAction) -> None:
    f = sub.add_parser("failures", help="failing queries of a saved run, worst first, by cause")
    _add_saved_run_args(f)
    common.add_run_arg(f)
    f.add_argument("--cause", choices=list(CAUSES), default=None, help="only this cause")
    f.add_argument(
        "--slice",
        metavar="KEY=VALUE",
        default=None,
        help=f"only one slice, KEY one of {', '.join(SLICES)} (e.g. difficulty=hard)",
    )
    f.add_argument("--query", metavar="QID", default=None, help="show one query's full story")
    f.set_defaults(func=_failures)

    r = sub.add_parser("runs", help="saved evaluation runs")
    rsub = r.add_subparsers(dest="runs_command", metavar="SUBCOMMAND", required=True)
    ls = rsub.add_parser("list", help="saved runs, newest first, named by config label")
    common.add_kb_arg(ls)
    common.add_json_arg(ls)
    ls.add_argument("--limit", type=int, default=20, help="at most this many (default 20)")
    ls.set_defaults(func=_list)
    d = rsub.add_parser("diff", help="2-4 saved runs query by query (won / lost / tied / changed)")
    _add_saved_run_args(d)
    d.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="2-4 run ids or config labels (the newest run of each); the first is the reference",
    )
    d.add_argument("--measure", default="mrr", help="per-query measure (default: mrr)")
    d.add_argument("--outcome", choices=list(OUTCOMES), default=None, help="only these queries")
    d.set_defaults(func=_diff)


def _add_saved_run_args(p: argparse.ArgumentParser) -> None:
    common.add_kb_arg(p)
    common.add_search_mode_arg(p, "the run's first mode")
    common.add_json_arg(p)


def _record(args: argparse.Namespace, run_id: str | None) -> RunRecord:
    ws = common.workspace(args)
    if run_id:
        return load_run_by_id(ws, run_id)
    rec = latest_run_record(ws.runs_dir)
    if rec is None:
        raise EngineError(f"no saved run under {ws.runs_dir}; run `wikirag eval` first")
    return rec


def _mode(args: argparse.Namespace, rec: RunRecord) -> str:
    if args.mode and args.mode not in rec.modes:
        raise EngineError(f"run {rec.run_id} has modes {', '.join(rec.modes)}, not {args.mode}")
    return args.mode or rec.modes[0]


def _failures(args: argparse.Namespace) -> int:
    rec = _record(args, args.run)
    mode = _mode(args, rec)
    if args.query:
        s = A.story(rec, mode, args.query)
        if args.json:
            from dataclasses import asdict

            common.print_json(asdict(s))
            return 0
        out = [f"{s.id} · {s.query}  ({mode}; mrr {s.metrics.get('mrr', 0):.3f})"]
        if s.miss:
            out.append(f"miss: {s.miss.text()}")
        out.append("gold:")
        for g in s.gold:
            where = f"rank {g.final}" if g.final else "not ranked"
            lost = f" — {g.fate.text()}" if g.fate else ""
            out.append(
                f"  {g.node_id}: {where}; vector {rank_text(g.vector, g.vector_any)}, "
                f"bm25 {rank_text(g.bm25, g.bm25_any)}, fusion {rank_text(g.fusion)}{lost}"
            )
        out.append("ranked:")
        for r in s.ranked[:10]:
            mark = "*" if r.relevant else " "
            out.append(
                f" {mark}{r.rank:>3} {r.node_id}  (vector {rank_text(r.vector)}, "
                f"bm25 {rank_text(r.bm25)}, fusion {rank_text(r.fusion)})"
            )
        sys.stdout.write("\n".join(out) + "\n")
        return 0
    slice_by = slice_value = None
    if args.slice:
        slice_by, sep, slice_value = args.slice.partition("=")
        if not sep:
            raise EngineError(f"--slice takes KEY=VALUE, got {args.slice!r}")
    rows = A.failures(rec, mode, cause=args.cause, slice_by=slice_by, slice_value=slice_value)
    if args.json:
        common.print_json(
            {
                "run_id": rec.run_id,
                "run": rec.name,
                "mode": mode,
                "failures": [r.to_dict() for r in rows],
            }
        )
        return 0
    total = len(rec.for_mode(mode))
    lines = [f"run {rec.name} ({rec.run_id}, {mode}): {len(rows)} of {total} queries miss at K=5"]
    for f in rows:
        lines.append(
            f"{f.id:<10} recall@5 {f.recall5:.2f}  mrr {f.mrr:.3f}  {f.cause_text:<36} {f.query}"
        )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _diff(args: argparse.Namespace) -> int:
    if not 2 <= len(args.runs) <= 4:
        raise EngineError(f"runs diff takes 2 to 4 runs; got {len(args.runs)}")
    recs = [_record(args, r) for r in args.runs]
    mode = _mode(args, recs[0])
    rows = A.run_matrix(recs, mode, args.measure, outcome=args.outcome)
    labels = [r.name for r in recs]
    if args.json:
        common.print_json(
            {
                "runs": labels,
                "run_ids": [r.run_id for r in recs],
                "mode": mode,
                "measure": args.measure,
                "counts": A.outcome_counts(A.run_matrix(recs, mode, args.measure)),
                "queries": [r.to_dict(labels, args.measure) for r in rows],
            }
        )
        return 0
    counts = A.outcome_counts(A.run_matrix(recs, mode, args.measure))
    lines = [
        f"{labels[-1]} vs {labels[0]} ({mode}, {args.measure}): "
        + ", ".join(f"{n} {k}" for k, n in counts.items())
    ]
    for r in rows:
        vals = " ".join(f"{v:.3f}" for v in r.values)
        lines.append(f"{r.id:<10} {r.outcome:<8} {vals}  Δ {r.deltas[-1]:+.3f}  {r.query}")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _list(args: argparse.Namespace) -> int:
    ws = common.workspace(args)
    runs = list_saved_runs(ws.runs_dir, args.limit)
    if args.json:
        common.print_json(
            [
                {
                    "run_id": r.run_id,
                    "label": r.label,
                    "name": r.name,
                    "created": r.created,
                    "dataset": r.dataset,
                    "split": r.split,
                    "modes": list(r.modes),
                    "queries": r.queries,
                    "means": r.means,
                }
                for r in runs
            ]
        )
        return 0
    if not runs:
        sys.stdout.write(f"no saved runs under {ws.runs_dir}; run `wikirag eval`\n")
        return 0
    for r in runs:
        sys.stdout.write(
            f"{r.name:<48} recall@5 {r.means.get('recall@5', 0):.3f}  mrr "
            f"{r.means.get('mrr', 0):.3f}  {r.split:<7} {r.queries:>4} q  {r.run_id}\n"
        )
    return 0
