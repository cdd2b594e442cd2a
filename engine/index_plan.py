"""What an update has to do: the KB's node hashes compared with the manifest's.

A node's hash pair is (embed hash, row hash): the first changes when its embedded text
does (re-embed), the second when anything in its row does (rewrite the row). A file whose
bytes the manifest has indexed keeps its nodes' hashes without hashing them again, so
planning an update costs in proportion to the changed files, not the corpus.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.hash_tables import FileHashes, NodeHashes
from engine.manifest import Manifest
from engine.rows import TEXT_LAYOUT, node_hashes

HashPair = tuple[str, str]


@dataclass(frozen=True)
class UpdatePlan:
    """The nodes an incremental update adds, rewrites and removes (ids in KB order)."""

    hashes: Mapping[str, Sequence[str]]  # every KB node's hash pair
    added: list[str]
    changed: list[str]
    removed: list[str]

    @property
    def empty(self) -> bool:
        return not (self.added or self.changed or self.removed)

    @property
    def stale(self) -> list[str]:
        """Stored rows the update replaces or drops."""
        return self.changed + self.removed


def hash_context(cfg: EngineConfig, summaries: Mapping[str, str] | None) -> str:
    """What node hashes depend on besides the file: text layout, tokenizer, summaries."""
    h = hashlib.sha256(
        f"{TEXT_LAYOUT}\x00{cfg.lexical.tokenizer_spec}\x00{cfg.index.content_chars}".encode()
    )
    for key in sorted(summaries or {}):
        h.update(f"\x00{key}\x00{(summaries or {})[key]}".encode())
    return h.hexdigest()[:16]


def kb_hashes(
    kb: KnowledgeBase,
    cfg: EngineConfig,
    summaries: Mapping[str, str] | None = None,
    reuse: Manifest | None = None,
) -> dict[str, HashPair]:
    """Every node's hash pair; a file whose bytes ``reuse`` has indexed keeps its hashes."""
    same = reuse is not None and reuse.hash_context == hash_context(cfg, summaries)
    seen = reuse.files if reuse is not None and same else {}
    out: dict[str, HashPair] = {}
    for doc in kb.documents:
        if reuse is not None and doc.source_hash and seen.get(doc.file_path) == doc.source_hash:
            prev = [reuse.nodes.get(n.node_id) for n in doc.nodes]
            if all(p is not None and len(p) == 2 for p in prev):
                for n, p in zip(doc.nodes, prev, strict=True):
                    assert p is not None  # checked above; for the type checker
                    out[n.node_id] = (p[0], p[1])
                continue
        for n in doc.nodes:
            out[n.node_id] = node_hashes(n, cfg, summaries)
    return out


def file_hashes(kb: KnowledgeBase) -> dict[str, str]:
    """rel path -> source hash of every parsed file of the KB."""
    return {d.file_path: d.source_hash for d in kb.documents if d.source_hash}


def fingerprint(hashes: Mapping[str, Sequence[str]]) -> str:
    """One hash over every node's hash pair (whatever the mapping's order or storage)."""
    return NodeHashes.of(hashes).fingerprint()


def plan_update(
    kb: KnowledgeBase,
    cfg: EngineConfig,
    summaries: Mapping[str, str] | None,
    old: Manifest,
) -> UpdatePlan:
    """Compare the KB with the index ``old`` describes.

    Only the nodes of files whose bytes changed (or that ``old`` does not know) are hashed
    and compared; the rest keep the manifest's pairs (the new hashes are the old ones with
    these changes, engine/hash_tables.py: nothing is copied per node).
    """
    prev = NodeHashes.of(old.nodes)
    seen = (
        FileHashes.of(old.files).as_dict()
        if old.hash_context == hash_context(cfg, summaries)
        else {}
    )
    prev_keys = prev.key_set()
    unknown = kb.nodes.keys() - prev_keys  # set operations run in C, not per node here
    added: list[str] = []
    changed: list[str] = []
    changes: dict[str, tuple[str, str] | None] = {}
    for doc in kb.documents:
        if (
            doc.source_hash
            and seen.get(doc.file_path) == doc.source_hash
            and (not unknown or not any(n.node_id in unknown for n in doc.nodes))
        ):
            continue
        for n in doc.nodes:
            h = node_hashes(n, cfg, summaries)
            p = prev.get(n.node_id)
            if p is None:
                added.append(n.node_id)
            elif p[0] != h[0] or p[1] != h[1]:
                changed.append(n.node_id)
            changes[n.node_id] = h
    # Every old node still in the KB: nothing removed (the usual case; no set difference).
    kept = len(kb.nodes) - len(unknown)
    removed = sorted(prev_keys.difference(kb.nodes)) if kept != len(prev_keys) else []
    for nid in removed:
        changes[nid] = None
    return UpdatePlan(prev.updated(changes), added, changed, removed)


def freshness(kb: KnowledgeBase, cfg: EngineConfig, manifest: Manifest | None) -> dict[str, Any]:
    """How many KB nodes are new / changed / deleted compared with the index manifest.

    With ``index.use_summaries`` the LLM summaries the index was built with (recorded in the
    manifest) are applied, so an unchanged chapter reads as unchanged.
    """
    if manifest is None:
        return {"new": len(kb.nodes), "changed": 0, "deleted": 0, "fresh": False}
    used = manifest.summaries if cfg.index.use_summaries else None
    plan = plan_update(kb, cfg, used, manifest)
    return {
        "new": len(plan.added),
        "changed": len(plan.changed),
        "deleted": len(plan.removed),
        "fresh": plan.empty,
    }
