"""`wikirag tree`: parse the KB into chapter trees, summarise, export or import them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from engine.atomic import atomic_write_text
from engine.chapters import KnowledgeBase, Node
from engine.tree import parse_kb
from engine.tree_io import export_chapter_trees, import_chapter_trees
from workbench.commands.common import add_json_arg, add_kb_arg, info, print_json

TREE_DOCUMENTS = 3  # documents drawn in the compact tree of the readable summary
TREE_NODES = 12  # chapters drawn per document before "… N more"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tree",
        help="parse the KB into chapter trees (summary, --json, --out chapter_trees.json)",
    )
    add_kb_arg(p)
    add_json_arg(p, "print chapter_trees.json on stdout")
    p.add_argument("--out", default=None, metavar="FILE", help="write chapter_trees.json here")
    p.add_argument(
        "--import",
        dest="import_path",
        default=None,
        metavar="FILE",
        help="read an existing chapter_trees.json instead of parsing --kb",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if args.import_path:
        kb = import_chapter_trees(args.import_path)
        source = args.import_path
    else:
        kb = parse_kb(args.kb)
        source = args.kb
    export = export_chapter_trees(kb)
    if args.out:
        atomic_write_text(Path(args.out), json.dumps(export, ensure_ascii=False, indent=2) + "\n")
        info(f"wrote {args.out}")
    if args.json:
        print_json(export)
    else:
        sys.stdout.write(summary_text(kb, source))
    return 0


def summary_text(kb: KnowledgeBase, source: str) -> str:
    """Readable summary: counts, every problem, and the first documents as a tree."""
    stats = kb.stats()
    lines = [
        f"{source}: {stats['totalDocuments']} documents, {stats['totalChapters']} chapters, "
        f"max depth {stats['maxDepth']}, {len(kb.problems)} problems"
    ]
    for p in kb.problems:
        where = f"{p.file_path}:{p.line}" if p.line else p.file_path
        lines.append(f"  {p.severity}: {where} {p.what} — {p.todo}")
    for doc in kb.documents[:TREE_DOCUMENTS]:
        lines.append("")
        lines.extend(_doc_tree(doc.nodes))
    rest = len(kb.documents) - TREE_DOCUMENTS
    if rest > 0:
        lines.append(f"\n… and {rest} more documents")
    return "\n".join(lines) + "\n"


def _doc_tree(nodes: tuple[Node, ...]) -> list[str]:
    head = nodes[0]
    out = [f"{head.file_path}  ({head.title})"]
    depth = {head.node_id: 0}
    for n in nodes[1 : TREE_NODES + 1]:
        depth[n.node_id] = depth.get(n.parent_id or "", 0) + 1
        out.append(f"{'  ' * depth[n.node_id]}{'#' * n.level} {n.title}  [{n.node_id}] :{n.line}")
    if len(nodes) - 1 > TREE_NODES:
        out.append(f"  … {len(nodes) - 1 - TREE_NODES} more chapters")
    return out
