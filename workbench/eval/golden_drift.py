"""Labels that drifted: relevant ids a wiki edit made stale, likely current ids for them,
and the remap that fixes a golden set (`wikirag golden drift` / `remap`, the Golden set page).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from workbench.eval.golden import GoldenSet
from workbench.eval.stale_ids import suggest_ids


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
