"""Labels that drifted: relevant ids a wiki edit made stale, likely current ids for them,
and the remap that fixes a golden set (`wikirag golden drift` / `remap`, the Golden set page).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workbench.eval.golden import GoldenSet


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


@dataclass(frozen=True)
class Drift:
    item_id: str
    stale_id: str
    suggestions: tuple[str, ...]


def drift_report(gs: GoldenSet, kb: Any) -> list[Drift]:
    """Entries whose relevant ids no longer exist in the KB, with suggested remaps."""
    out = []
    for it in gs.items:
        for nid in it.relevant:
            if nid not in kb:
                out.append(Drift(it.id, nid, tuple(suggest_ids(nid, kb))))
    return out


def remap(gs: GoldenSet, mapping: Mapping[str, str]) -> GoldenSet:
    """Return a new set with stale ids replaced (old -> new); the caller saves it."""
    items = []
    for it in gs.items:
        rel = tuple(dict.fromkeys(mapping.get(r, r) for r in it.relevant))
        items.append(replace(it, relevant=rel))
    return replace(gs, items=tuple(items))
