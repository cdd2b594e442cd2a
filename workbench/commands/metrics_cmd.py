"""`wikirag metrics --qrels FILE --run FILE`: score a TREC run, the way trec_eval would."""

from __future__ import annotations

import argparse
import sys

from engine.errors import EngineError
from workbench.commands.common import add_json_arg, print_json
from workbench.eval.metrics import default_measures, evaluate_run, known_measures, parse_measure
from workbench.eval.trec import read_qrels, read_run


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "metrics",
        help="score a TREC run file against TREC qrels",
        description=(
            "Score a TREC run against qrels. Runs are ranked by score, ties by doc id "
            "descending (trec_eval's order). Means cover the queries with a relevant "
            "document; a judged query missing from the run scores 0. Measures: "
            + "; ".join(known_measures())
        ),
    )
    p.add_argument("--qrels", required=True, help="TREC qrels file: qid 0 docid rel")
    p.add_argument("--run", required=True, help="TREC run file: qid Q0 docid rank score tag")
    p.add_argument(
        "--measures",
        nargs="+",
        default=None,
        metavar="MEASURE",
        help="e.g. ndcg@10 recall@5 mrr (default: the workbench's standard set)",
    )
    p.add_argument("--per-query", action="store_true", help="also print one row per query")
    p.add_argument(
        "--relevance-level",
        type=int,
        default=1,
        help="smallest grade that counts as relevant (trec_eval -l; default 1)",
    )
    add_json_arg(p, "print JSON on stdout")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    try:
        measures = (
            [parse_measure(m) for m in args.measures] if args.measures else list(default_measures())
        )
    except ValueError as exc:
        raise EngineError(str(exc)) from None
    qrels = read_qrels(args.qrels)
    run = read_run(args.run)
    if run and not any(q in qrels for q in run):
        raise EngineError(
            f"no query of {args.run} appears in {args.qrels}; check that both files use the same query ids"
        )
    ev = evaluate_run(run, qrels, measures, relevance_level=args.relevance_level)
    names = [str(m) for m in measures]
    if args.json:
        out = {"num_queries": ev.num_queries, "skipped": list(ev.skipped), "means": ev.means}
        if args.per_query:
            out["per_query"] = ev.per_query
        print_json(out)
        return 0
    width = max([len(n) for n in names] + [len("measure")])
    lines = []
    if args.per_query:
        qwidth = max([len(q) for q in ev.per_query] + [len("query")])
        lines.append(f"{'measure':<{width}}  {'query':<{qwidth}}  value")
        for qid, row in ev.per_query.items():
            lines.extend(f"{n:<{width}}  {qid:<{qwidth}}  {row[n]:.4f}" for n in names)
        lines.extend(f"{n:<{width}}  {'all':<{qwidth}}  {ev.means[n]:.4f}" for n in names)
    else:
        lines.append(f"{'measure':<{width}}  value")
        lines.extend(f"{n:<{width}}  {ev.means[n]:.4f}" for n in names)
    lines.append(f"({ev.num_queries} queries evaluated, {len(ev.skipped)} skipped)")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
