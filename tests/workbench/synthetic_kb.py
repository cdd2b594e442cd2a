"""A generated KB where the right config is known: BM25 finds every answer, vectors do not.

Each section holds one rare code word inside filler text that every section shares; each
query is its section's code word plus filler. BM25 ranks the section with the code word
first (rare term, high idf); the hash embedder's character n-grams are dominated by the
shared filler, so the vector channel is close to random. A baseline in vector mode is
therefore beaten by keyword or BM25-heavy hybrid configs, which the optimizer must find.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from engine.indexer import build_index
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG

FILLER = (
    "This chapter explains the retrieval pipeline, the index, the configuration, the "
    "evaluation and the experiments of the workbench in some detail for the team."
)
DOCS = 8
SECTIONS = 3
TUNE = 18  # the first 18 queries are tune, the other 6 holdout


def _code(d: int, s: int) -> str:
    return f"kw{d}x{s}q{(d * 7 + s * 3) % 10}"


def write(root: Path) -> tuple[Path, Path]:
    """Write the KB and its golden set under ``root``; index it with the hash embedder."""
    kb = root / "kb"
    for d in range(DOCS):
        parts = [f"# Topic {d}\n\n{FILLER}\n"]
        for s in range(SECTIONS):
            parts.append(f"## Part {d}-{s}\n\n{FILLER} The key term is {_code(d, s)}. {FILLER}\n")
        path = kb / f"topic{d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(parts), encoding="utf-8")
    parsed = parse_kb(kb)
    by_title = {n.title: nid for nid, n in parsed.nodes.items()}
    queries = []
    n = 0
    for d in range(DOCS):
        for s in range(SECTIONS):
            n += 1
            queries.append(
                {
                    "id": f"q{n:02d}",
                    "query": f"{FILLER} Which part covers {_code(d, s)}?",
                    "relevant": [by_title[f"Part {d}-{s}"]],
                    "difficulty": ("easy", "medium", "hard")[n % 3],
                    "category": f"c{d % 2}",
                    "split": "tune" if n <= TUNE else "holdout",
                }
            )
    golden_path = root / "datasets" / "kb.yaml"
    golden_path.parent.mkdir(parents=True, exist_ok=True)
    golden_path.write_text(
        yaml.safe_dump({"name": "kb", "queries": queries}, allow_unicode=True), encoding="utf-8"
    )
    build_index(parsed, HASH_CFG, str(root / ".wikirag" / "kb"))
    return kb, golden_path
