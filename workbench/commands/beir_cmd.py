"""`wikirag import-beir DIR --kb-out DIR --dataset-out FILE`: a BEIR benchmark as KB + golden set."""

from __future__ import annotations

import argparse
import sys

from workbench.commands.common import add_json_arg, print_json
from workbench.eval.beir import import_beir


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "import-beir",
        help="turn a BEIR folder (corpus.jsonl, queries.jsonl, qrels.tsv) into a KB and a golden set",
    )
    p.add_argument("folder", metavar="DIR", help="BEIR folder")
    p.add_argument(
        "--kb-out", required=True, metavar="DIR", help="where to write one .md per passage"
    )
    p.add_argument("--dataset-out", required=True, metavar="FILE", help="golden set YAML to write")
    p.add_argument(
        "--limit-queries",
        type=int,
        default=None,
        metavar="N",
        help="keep the first N judged queries",
    )
    p.add_argument("--name", default=None, help="golden set name (default: the folder's name)")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a non-empty --kb-out folder (its files are removed) and an existing "
        "--dataset-out file; without it the import refuses to overwrite",
    )
    add_json_arg(p, "print a JSON summary on stdout")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    result = import_beir(
        args.folder,
        args.kb_out,
        args.dataset_out,
        limit_queries=args.limit_queries,
        name=args.name,
        force=args.force,
    )
    if args.json:
        print_json(result.to_dict())
        return 0
    sys.stdout.write(
        f"wrote {result.passages} passages to {result.kb_dir} and {result.queries} queries to "
        f"{result.dataset_path}"
        + (
            f"; skipped {len(result.skipped_queries)} (empty text or no relevant passage)"
            if result.skipped_queries
            else ""
        )
        + (
            f"; {len(result.truncated_queries)} had more than 4 relevant passages (best 4 kept)"
            if result.truncated_queries
            else ""
        )
        + "\n"
    )
    return 0
