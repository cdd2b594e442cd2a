"""Open engines and evaluators for a workspace (shared by the CLI, the UI and the server)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from workbench.eval.evaluate import EvalCache, Evaluator
from workbench.progress import StderrBar
from workbench.workspace import Workspace

ProgressFn = Callable[[int, int, str], None]
_lock = threading.Lock()
_engines: dict[tuple[str, str, str], Any] = {}
_caches: dict[str, EvalCache] = {}


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


def open_engine(
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
    from engine.search import Engine  # heavy imports stay out of CLI start-up

    location = index_location(ws, cfg) if side_index else str(ws.index)
    key = (str(ws.kb.resolve()), location, cfg.hash)
    with _lock:
        eng = _engines.get(key)
        if eng is not None:
            return eng
        base = next(
            (e for (kb, idx, _), e in _engines.items() if kb == key[0] and idx == key[1]), None
        )
        if base is not None:
            eng = base.with_config(cfg)
        else:
            if location != str(ws.index):
                _ensure_side_index(ws, cfg, location, progress)
            eng = Engine.open(ws.kb, location, cfg)
        _engines[key] = eng
        return eng


def _ensure_side_index(
    ws: Workspace, cfg: EngineConfig, location: str, progress: ProgressFn | None
) -> None:
    from engine.indexer import build_index, read_manifest
    from engine.store import Location
    from engine.tree import parse_kb

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


def forget_engines() -> None:
    """Drop cached engines (after a re-index, so the next open sees the new index)."""
    with _lock:
        _engines.clear()


def evaluator(ws: Workspace, cfg: EngineConfig) -> Evaluator:
    key = str(ws.index)  # one cache per workspace; keys inside tell index versions apart
    with _lock:
        cache = _caches.get(key)
        if cache is None:
            cache = _caches[key] = EvalCache.open(cache_dir(ws))
    return Evaluator(open_engine(ws, cfg, side_index=True), cache)
