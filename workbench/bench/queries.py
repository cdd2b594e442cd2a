"""The queries a bench runs: sampled from the KB (fixed seed) or read from a file."""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Any

from workbench.eval import golden

_SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=\.)\s")


def _first_sentence(content: str) -> str:
    lines = [ln.strip() for ln in content.splitlines()]
    body = [ln for ln in lines if ln and not ln.startswith(("#", "```", "|", "-", "*", ">", "!"))]
    if not body:
        return ""
    text = re.sub(r"[`*_\[\]()]", "", body[0])
    first = _SENTENCE_END.split(text, maxsplit=1)[0].strip()
    return first[:80]


def sample_queries(kb: Any, n: int, seed: int = 7) -> list[str]:
    """Deterministic queries from the KB: alternately a chapter title and a first sentence."""
    nodes = [node for node in kb.nodes.values() if node.level >= 1 and node.content.strip()]
    nodes.sort(key=lambda node: node.node_id)
    rng = random.Random(seed)
    picked = rng.sample(nodes, min(len(nodes), max(n * 2, n)))
    out: list[str] = []
    seen: set[str] = set()
    for i, node in enumerate(picked):
        q = node.title if i % 2 == 0 else _first_sentence(node.content) or node.title
        q = q.strip()
        if len(q) >= 2 and q not in seen:
            seen.add(q)
            out.append(q)
        if len(out) >= n:
            break
    return out


def load_queries(path: str | Path) -> list[str]:
    """Queries from a golden set YAML (answerable items) or a text file (one per line)."""
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        return [i.query for i in golden.load(p).answerable()]
    return [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip()]
