"""Build the automatic "FAQ headings" golden set from TiDB's Chinese docs (pingcap-docs-cn).

    python benchmarks/make_faq_headings.py [--kb ../shared/data/corpora/pingcap-docs-cn]
                                           [--out benchmarks/sets/pingcap-faq-headings.yaml]

Every chapter whose heading is a question (ends with ? or ？) becomes one query: the heading
text itself (a leading section number such as "1.1.3 " removed), relevant = that chapter and
every other chapter with the same question as heading (the docs repeat some FAQ entries on
two pages), at most 4. This is volume, not realism: the query shares its words with the
heading, so it flatters the keyword channel; the hand-written set
(pingcap-faq-written.yaml) is the realistic one. Only node ids and heading text are written.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SHARED = next(
    (p / "shared" / "data" for p in ROOT.parents if (p / "shared" / "data").is_dir()),
    ROOT.parent / "shared" / "data",
)
_QUESTION = re.compile(r"[?？]\s*$")
_HEADING_LINE = re.compile(r"^#{2,6} .*[?？]\s*$", re.MULTILINE)
_NUMBERING = re.compile(r"^\d+(\.\d+)*\s+")


def question_chapters(kb: Path) -> list[tuple[str, str, str]]:
    """(node id, question, category) for every question heading, in file order."""
    from engine.tree import parse_document

    out = []
    for path in sorted(kb.rglob("*.md")):
        data = path.read_bytes()
        # Parsing 1,200 files costs a minute; only files with a question heading matter.
        if not _HEADING_LINE.search(data.decode("utf-8", "replace")):
            continue
        rel = path.relative_to(kb).as_posix()
        for node in parse_document(data, rel).nodes:
            if node.level >= 2 and _QUESTION.search(node.title):
                question = _NUMBERING.sub("", node.title.strip())
                out.append((node.node_id, question, Path(rel).stem))
    return out


def build(kb: Path) -> str:
    chapters = question_chapters(kb)
    by_question: dict[str, list[str]] = defaultdict(list)
    for nid, q, _ in chapters:
        by_question[q].append(nid)
    lines = [
        "# AUTOMATIC set (heading text as query), made by benchmarks/make_faq_headings.py from",
        "# /work/shared/data/corpora/pingcap-docs-cn: every chapter whose heading is a question.",
        "# Queries repeat the heading words, so this set flatters the keyword channel; use it",
        "# for volume beside the hand-written pingcap-faq-written.yaml. category = file name.",
        "name: pingcap-faq-headings",
        "queries:",
    ]
    seen: set[str] = set()
    n = 0
    for _nid, q, cat in chapters:
        if q in seen:
            continue
        seen.add(q)
        n += 1
        lines += [
            f"  - id: a{n:03d}",
            f"    query: {json.dumps(q, ensure_ascii=False)}",
            f"    relevant: {json.dumps(by_question[q][:4], ensure_ascii=False)}",
            "    difficulty: easy",
            f"    category: {cat}",
        ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kb", default=str(SHARED / "corpora/pingcap-docs-cn"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks/sets/pingcap-faq-headings.yaml"))
    args = ap.parse_args(argv)
    kb = Path(args.kb)
    if not kb.is_dir():
        print(f"error: no such KB folder: {kb}", file=sys.stderr)
        return 2
    from engine.atomic import atomic_write_text

    text = build(kb)
    atomic_write_text(Path(args.out), text)
    print(f"wrote {args.out} ({text.count('  - id:')} queries)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
