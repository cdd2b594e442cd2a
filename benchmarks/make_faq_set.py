"""A FAQ question set from pingcap-docs-cn: every heading in a ``*faq*`` file that ends in a
question mark is a query, its own chapter the one relevant answer.

    python benchmarks/make_faq_set.py [--src ../shared/data/corpora/pingcap-docs-cn]
                                      [--kb /tmp/lex_faq_kb] [--dataset /tmp/lex_faq.yaml]

The KB is the FAQ files plus 250 other files drawn with a fixed seed (3,112 chapters, small
enough to embed on a busy laptop); then ``wikirag index --kb KB --index ...``. Queries are the
heading text without its trailing question mark, so they favour title matching: read the
numbers as "find the FAQ entry by its question", not as paraphrase retrieval.
"""

from __future__ import annotations

import argparse
import random
import shutil
from pathlib import Path

import yaml

from engine.tree import parse_kb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--src", default="../shared/data/corpora/pingcap-docs-cn")
    ap.add_argument("--kb", default="/tmp/lex_faq_kb")
    ap.add_argument("--dataset", default="/tmp/lex_faq.yaml")
    ap.add_argument("--others", type=int, default=250)
    ap.add_argument("--max-queries", type=int, default=300)
    args = ap.parse_args()
    src, dst = Path(args.src), Path(args.kb)
    if dst.exists():
        shutil.rmtree(dst)
    files = sorted(p.relative_to(src) for p in src.rglob("*.md"))
    faq = [p for p in files if "faq" in str(p)]
    rest = [p for p in files if "faq" not in str(p)]
    rng = random.Random(11)
    for p in faq + rng.sample(rest, args.others):
        (dst / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(src / p, dst / p)
    kb = parse_kb(dst)
    qs = [
        n
        for n in kb.nodes.values()
        if "faq" in n.file_path and n.level > 0 and n.title.strip().endswith(("？", "?"))
    ]
    qs = sorted(qs, key=lambda n: n.node_id)
    rng.shuffle(qs)
    items = [
        {"id": f"f{i:03d}", "query": n.title.strip().rstrip("？?").strip(), "relevant": [n.node_id]}
        for i, n in enumerate(qs[: args.max_queries])
    ]
    text = yaml.safe_dump({"name": "faq", "queries": items}, allow_unicode=True, sort_keys=False)
    Path(args.dataset).write_text(text, encoding="utf-8")
    print(f"{len(kb.nodes)} chapters in {dst}; {len(items)} queries in {args.dataset}")


if __name__ == "__main__":
    main()
