"""Likely current ids for a chapter id a wiki edit made stale: what `golden validate` and
`golden drift` suggest for a relevant id the index no longer has."""

from __future__ import annotations

import difflib
from typing import Any


def suggest_ids(stale_id: str, kb: Any, n: int = 3) -> list[str]:
    """Likeliest current ids for a stale one: same document first, then by id/title similarity."""
    doc_id, _, path = stale_id.partition("#")
    last = path.rsplit("/", 1)[-1]
    scored: list[tuple[float, str]] = []
    for nid, node in kb.nodes.items():
        if node.level == 0:
            continue
        s = difflib.SequenceMatcher(None, stale_id, nid).ratio()
        s += 0.5 * difflib.SequenceMatcher(None, last, _slug_tail(nid)).ratio()
        if node.doc_id == doc_id:
            s += 0.5
        scored.append((s, nid))
    scored.sort(key=lambda t: (-t[0], t[1]))
    return [nid for _, nid in scored[:n]]


def _slug_tail(node_id: str) -> str:
    return node_id.partition("#")[2].rsplit("/", 1)[-1]
