"""What engines derived with ``Engine.with_config`` share: the loaded state and the models.

Concurrency: everything a query reads lives in an immutable ``State`` (KB + index
snapshot + freshness) that is replaced as a whole when an index is rebuilt or refreshed; a
query takes one reference at its start, so a concurrent rebuild never changes what it
sees. One load or rebuild runs at a time (``swap_lock``); models are made once per config
section under ``models_lock``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig, RerankConfig
from engine.errors import ConfigError, EngineError
from engine.heap import release_free_heap
from engine.index_plan import freshness
from engine.manifest import require_manifest
from engine.parse_cache import ParseCache
from engine.snapshot import IndexSnapshot, load_snapshot
from engine.store import Location, Store
from engine.types import Embedder, Reranker

VECTOR_BACKENDS = ("numpy", "lance")


@dataclass(frozen=True)
class State:
    """One KB with its index snapshot, and how fresh the index is for that KB."""

    kb: KnowledgeBase
    snapshot: IndexSnapshot
    freshness: dict[str, Any]


class SharedIndex:
    """What engines derived with ``with_config`` share: the index, the state, the models."""

    def __init__(
        self,
        index_uri: str,
        storage_options: Mapping[str, str] | None,
        kb_dir: str | None,
        vector_backend: str,
    ) -> None:
        if vector_backend not in VECTOR_BACKENDS:
            raise ConfigError(f"vector_backend must be numpy or lance; got {vector_backend!r}")
        self.index_uri = str(index_uri)
        self.storage_options = dict(storage_options or {})
        self.kb_dir = kb_dir
        self.vector_backend = vector_backend
        self.loc = Location(self.index_uri, self.storage_options)
        self._store: Store | None = None
        self.state: State | None = None
        self.swap_lock = threading.Lock()  # one state load / rebuild at a time
        self.models_lock = threading.Lock()
        self.embedders: dict[Any, Embedder] = {}
        self.rerankers: dict[Any, Reranker | None] = {}
        self._executor: ThreadPoolExecutor | None = None
        # Re-parsing the KB for a refresh or rebuild parses only the files that changed.
        self.parse_cache = ParseCache()

    @property
    def store(self) -> Store:
        """The LanceDB connection, made on first use (so opening a missing index creates
        no folder)."""
        with self.models_lock:
            if self._store is None:
                self._store = Store(self.index_uri, self.storage_options)
            return self._store

    def executor(self) -> ThreadPoolExecutor:
        """Threads for the lexical channel of hybrid searches (created on first use)."""
        with self.models_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(
                    max_workers=min(8, (os.cpu_count() or 2) * 2), thread_name_prefix="wikirag"
                )
            return self._executor

    def current(self) -> State:
        state = self.state
        if state is None:  # pragma: no cover - open() always loads
            raise EngineError("engine has no index loaded")
        return state

    def load(self, kb: KnowledgeBase, cfg: EngineConfig) -> State:
        """Load the manifest's snapshot and make it current (retrying once if it moved)."""
        hint = self.kb_dir or "DIR"
        for attempt in (1, 2):
            manifest = require_manifest(self.loc, hint)
            # Freshness first, then only the manifest's header is kept: the per-chapter maps
            # are not held while the snapshot's arrays load (the serving peak, issue 15).
            fresh = freshness(kb, cfg, manifest)
            header = manifest.header()
            del manifest
            release_free_heap()
            try:
                snap = load_snapshot(self.store, self.loc, header)
                break
            except (OSError, ValueError, RuntimeError) as exc:
                # A concurrent full rebuild may have dropped the table we just read about.
                if attempt == 2:
                    raise EngineError(
                        f"cannot read the index at {self.index_uri} ({exc}); "
                        f"run `wikirag index --kb {hint}`"
                    ) from exc
        state = State(kb, snap, fresh)
        self.state = state
        release_free_heap()  # what the load read and dropped (engine/heap.py)
        return state


def rerank_key(cfg: RerankConfig) -> tuple[object, ...]:
    """What identifies a reranker model (the key of ``SharedIndex.rerankers``)."""
    # Pipeline-only fields (max_candidates, weight, content_chars) do not change the model.
    return (cfg.provider, cfg.model, cfg.base_url, cfg.api_key_env, cfg.timeout_s)


__all__ = ["VECTOR_BACKENDS", "SharedIndex", "State", "rerank_key"]
