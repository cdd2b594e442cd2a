"""`wikirag eval`: run a golden set through the engine, print metrics, save a run record."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from engine.config import SEARCH_MODES
from workbench.commands import common
from workbench.eval import golden
from workbench.eval.attribution import CAUSES
from workbench.eval.engines import evaluator
from workbench.eval.metrics import DEFAULT_FAMILIES
from workbench.eval.run_labels import workspace_label
from workbench.eval.run_record import RunRecord, save_run
from workbench.eval.unjudged import share_line
from workbench.progress import StderrBar

TABLE_KS = (1, 3, 5, 10, 20)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate the engine on a golden set")
    common.add_workspace_args(p, dataset=True)
    p.add_argument("--modes", nargs="+", default=["hybrid"], choices=SEARCH_MODES)
    common.add_rerank_arg(p)
    common.add_split_arg(p)
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="OUT",
        help="write the run record as JSON to OUT (or stdout with no value)",
    )
    p.add_argument("--trec-run", metavar="OUT", help="also write a TREC run file (first mode)")
    p.add_argument("--trec-qrels", metavar="OUT", help="also write the golden set as TREC qrels")
    p.add_argument("--no-save", action="store_true", help="do not write a run record")
    common.add_allow_invalid_arg(p)
    p.add_argument(
        "--gate",
        action="store_true",
        help="exit 1 with a one-line reason if this config regresses against the baseline",
    )
    p.add_argument(
        "--answers",
        action="store_true",
        help="also generate answers and score them (answer_contains, citations, refusals)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    gs = golden.load(ws.dataset)
    ev = evaluator(ws, cfg)
    gs = golden.checked(gs, ev.engine.kb, allow_invalid=args.allow_invalid, notify=common.info)
    total = len(gs.answerable(args.split)) * len(args.modes)
    bar = StderrBar(unit="q", desc="evaluating", total=total)
    result = ev.run(
        gs,
        cfg,
        modes=args.modes,
        rerank=args.rerank,
        split=args.split,
        progress=bar,
        kb_name=ws.name,
    )
    bar.close()
    result.label = workspace_label(ws.config_path, common.set_overrides(args))
    ev.cache.save()
    if args.answers:
        from workbench.answer.answer_eval import evaluate_answers

        result.answers = evaluate_answers(ev.engine, gs, cfg, split=args.split)
    record = result.to_dict()
    if not args.no_save:
        path = save_run(result, ws.runs_dir)
        common.info(f"run record: {path}")
    if args.trec_run or args.trec_qrels:
        from workbench.export.formats import ExportSource, golden_qrels, write

        # The whole golden set's labels (graded), not only the split this run scored.
        source = ExportSource(result, args.modes[0], qrels=golden_qrels(gs))
        if args.trec_run:
            write("trec-run", source, args.trec_run)
        if args.trec_qrels:
            write("trec-qrels", source, args.trec_qrels)

    if args.json == "-":
        common.print_json(record)
    else:
        if args.json:
            atomic_write_text(Path(args.json), json.dumps(record, ensure_ascii=False, indent=1))
        sys.stdout.write(format_run(result, record.get("answers")))
    if args.gate:
        from workbench.tune.gate import gate

        ok, reason = gate(ws, result, gs=gs)
        (sys.stdout if ok else sys.stderr).write(f"gate: {'PASS' if ok else 'FAIL'}: {reason}\n")
        return 0 if ok else 1
    return 0


def refusal_line(rows: list[dict]) -> str:
    """Both refusal rates with their counts: small sets (12 unanswerable items) need both."""
    un = [r for r in rows if r.get("unanswerable")]
    an = [r for r in rows if not r.get("unanswerable")]
    n_un = sum(bool(r.get("refusal")) for r in un)
    n_an = sum(bool(r.get("refusal")) for r in an)

    def rate(n: int, d: int) -> str:
        return f"{n / d:.3f}" if d else "n/a"

    return (
        f"refusals: unanswerable refused {n_un}/{len(un)} ({rate(n_un, len(un))}), "
        f"answerable wrongly refused {n_an}/{len(an)} ({rate(n_an, len(an))})"
    )


def format_run(run: RunRecord, answers: Mapping[str, Any] | None = None) -> str:
    """Plain-text tables of a run (what `wikirag eval` prints)."""
    lines = [
        f"run {run.run_id}  config {run.config.hash}  dataset {run.dataset.name} "
        f"({run.dataset.hash})  split {run.split}  rerank {'on' if run.rerank else 'off'}",
    ]
    if not run.queries:
        lines.append("no answerable queries in this split; add queries to the golden set")
        if answers:  # a set of unanswerable items still measures refusals
            lines.append(refusal_line(answers.get("per_query", [])))
        return "\n".join(lines) + "\n"
    for mode in run.modes:
        means = run.means(mode)
        lat = run.latency(mode)
        n = len(run.for_mode(mode))
        lines.append("")
        lines.append(f"== {mode}  ({n} queries, p50 {lat['p50']:.1f} ms, p95 {lat['p95']:.1f} ms)")
        lines.append("measure    " + "".join(f"{'@' + str(k):>8}" for k in TABLE_KS))
        for m in DEFAULT_FAMILIES:
            lines.append(
                f"{m:<11}" + "".join(f"{means.get(f'{m}@{k}', 0):>8.3f}" for k in TABLE_KS)
            )
        lines.append(f"MRR {means.get('mrr', 0):.3f}   MAP {means.get('map', 0):.3f}")
        lines.append(share_line(mode, run.unjudged_share(mode)))
        for by in ("difficulty", "category", "language"):
            rows = run.breakdown(mode, by)
            parts = [
                f"{g} R@5 {v.get('recall@5', 0):.2f} MRR {v.get('mrr', 0):.2f}"
                for g, v in rows.items()
            ]
            lines.append(f"by {by}: " + " | ".join(parts))
        fails = run.failures(mode)
        if fails:
            lines.append("misses at K=5 by cause:")
            for cause, ids in fails.items():
                lines.append(f"  {CAUSES[cause]:<36} {len(ids):>3}  {', '.join(ids[:8])}")
        worst = run.worst(mode, "recall@5", 5)
        lines.append("worst: " + ", ".join(f"{q} ({v:.2f})" for q, v in worst))
    if run.errors:
        lines.append(f"{run.errors} queries failed with errors; see the run record")
    if answers:
        lines.append("")
        lines.append(
            "answers: " + ", ".join(f"{k} {v:.3f}" for k, v in answers.get("means", {}).items())
        )
        lines.append(refusal_line(answers.get("per_query", [])))
    return "\n".join(lines) + "\n"
