"""Open engines and evaluators for a workspace (shared by the CLI, the UI and the server)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from workbench.context import Workspace
from workbench.evaluate import EvalCache, Evaluator

_lock = threading.Lock()
_engines: dict[tuple[str, str, str], Any] = {}
_caches: dict[str, EvalCache] = {}


def cache_dir(ws: Workspace) -> Path:
    """Evaluation caches live beside the index when it is a local folder."""
    idx = str(ws.index)
    if "://" in idx:
        return Path(".wikirag") / "cache" / ws.name
    return Path(idx) / "cache"


def open_engine(ws: Workspace, cfg: EngineConfig) -> Any:
    """One engine per (kb, index, config); engines for other configs share loaded models."""
    from engine.search import Engine  # heavy imports stay out of CLI start-up

    key = (str(ws.kb.resolve()), str(ws.index), cfg.hash)
    with _lock:
        eng = _engines.get(key)
        if eng is not None:
            return eng
        base = next(
            (e for (kb, idx, _), e in _engines.items() if kb == key[0] and idx == key[1]), None
        )
        eng = base.with_config(cfg) if base is not None else Engine.open(ws.kb, ws.index, cfg)
        _engines[key] = eng
        return eng


def forget_engines() -> None:
    """Drop cached engines (after a re-index, so the next open sees the new index)."""
    with _lock:
        _engines.clear()


def evaluator(ws: Workspace, cfg: EngineConfig) -> Evaluator:
    key = str(ws.index)
    with _lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = EvalCache.open(cache_dir(ws))
    return Evaluator(open_engine(ws, cfg), cache)
