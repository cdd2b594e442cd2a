"""Open engines and evaluators for a workspace: the one engine cache.

``EngineCache`` holds an engine per (KB, index, config) and an evaluation cache per index;
models are loaded once per process below it (``engine.models``). The CLI and the server use
the process's instance through ``open_engine`` / ``evaluator``; the UI holds its own,
wrapped once by ``st.cache_resource`` (``workbench.ui.resources``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.tree import parse_kb
from workbench.eval.evaluate import EvalCache, Evaluator
from workbench.progress import StderrBar
from workbench.workspace import Workspace

ProgressFn = Callable[[int, int, str], None]


def cache_dir(ws: Workspace) -> Path:
    """Evaluation caches live beside the index when it is a local folder."""
    idx = str(ws.index)
    if "://" in idx:
        return Path(".wikirag") / "cache" / ws.name
    return Path(idx) / "cache"


def index_location(ws: Workspace, cfg: EngineConfig) -> str:
    """The workspace's index, or a side index for a config that embeds differently.

    An experiment that changes the embedder, the embedded text (``embedding.*``,
    ``index.*``) or the stored keyword tokens (``lexical.stem``) cannot be scored on the
    main index; it gets its own index beside it, ``<index>@<key>``, built on first use.
    """
    key = cfg.index_key
    if key == ws.load_config().index_key:
        return str(ws.index)
    return f"{ws.index}@{key}"


class EngineCache:
    """Engines per (KB, index, config hash) and evaluation caches per index, thread-safe.

    Engines for other configs of one index share its snapshot and models
    (``Engine.with_config``).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._engines: dict[tuple[str, str, str], Any] = {}
        self._eval_caches: dict[str, EvalCache] = {}

    @staticmethod
    def _key(ws: Workspace, cfg: EngineConfig, side_index: bool) -> tuple[str, str, str]:
        location = index_location(ws, cfg) if side_index else str(ws.index)
        return (str(ws.kb.resolve()), location, cfg.hash)

    def is_open(self, ws: Workspace, cfg: EngineConfig, *, side_index: bool = False) -> bool:
        """Whether ``engine(ws, cfg)`` would answer without opening anything."""
        key = self._key(ws, cfg, side_index)
        with self._lock:
            return key in self._engines

    def engine(
        self,
        ws: Workspace,
        cfg: EngineConfig,
        progress: ProgressFn | None = None,
        *,
        side_index: bool = False,
    ) -> Any:
        """One engine per (kb, index, config); engines for other configs share loaded models.

        Serving opens the workspace's index as it is (a mismatch is reported, not papered
        over); evaluation passes ``side_index=True`` so a config that embeds differently is
        scored on its own index (see ``index_location``).
        """
        from engine.search import Engine  # deferred: loads lancedb (~2 s)

        key = self._key(ws, cfg, side_index)
        location = key[1]
        with self._lock:
            eng = self._engines.get(key)
            if eng is not None:
                return eng
            base = next(
                (
                    e
                    for (kb, idx, _), e in self._engines.items()
                    if kb == key[0] and idx == location
                ),
                None,
            )
            if base is not None:
                eng = base.with_config(cfg)
            else:
                if location != str(ws.index):
                    _ensure_side_index(ws, cfg, location, progress)
                eng = Engine.open(ws.kb, location, cfg)
            self._engines[key] = eng
            return eng

    def evaluator(self, ws: Workspace, cfg: EngineConfig) -> Evaluator:
        """An evaluator on ``cfg``'s engine (side index if needed) with the index's cache."""
        key = str(ws.index)  # one cache per workspace; keys inside tell index versions apart
        with self._lock:
            cache = self._eval_caches.get(key)
            if cache is None:
                cache = self._eval_caches[key] = EvalCache.open(cache_dir(ws))
        return Evaluator(self.engine(ws, cfg, side_index=True), cache)

    def forget(self) -> None:
        """Drop cached engines (after a re-index, so the next open sees the new index)."""
        with self._lock:
            self._engines.clear()


# The CLI's and the server's cache (one process, one command or server).
PROCESS_ENGINES = EngineCache()


def open_engine(
    ws: Workspace,
    cfg: EngineConfig,
    progress: ProgressFn | None = None,
    *,
    side_index: bool = False,
) -> Any:
    """``PROCESS_ENGINES.engine``: see ``EngineCache.engine``."""
    return PROCESS_ENGINES.engine(ws, cfg, progress, side_index=side_index)


def evaluator(ws: Workspace, cfg: EngineConfig) -> Evaluator:
    """``PROCESS_ENGINES.evaluator``: see ``EngineCache.evaluator``."""
    return PROCESS_ENGINES.evaluator(ws, cfg)


def forget_engines() -> None:
    """Drop the process's cached engines (after a re-index)."""
    PROCESS_ENGINES.forget()


def _ensure_side_index(
    ws: Workspace, cfg: EngineConfig, location: str, progress: ProgressFn | None
) -> None:
    from engine.indexer import build_index  # deferred: loads lancedb (~2 s)
    from engine.manifest import read_manifest  # deferred: loads lancedb (~2 s)
    from engine.store import Location  # deferred: loads lancedb (~2 s)

    if read_manifest(Location(location, None)) is not None:
        build_index(parse_kb(ws.kb), cfg, location, progress)  # incremental: cheap if fresh
        return
    sys.stderr.write(
        f"building a side index for this config's embedding / stemming settings at {location} "
        "(first use only)\n"
    )
    if progress is not None:
        build_index(parse_kb(ws.kb), cfg, location, progress)
        return
    with StderrBar(unit="item") as bar:
        build_index(parse_kb(ws.kb), cfg, location, bar)
