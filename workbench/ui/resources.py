"""Everything the pages load once and share: the only module with Streamlit cache decorators.

Caches key on what can change the value: the KB on its files' mtimes, the golden set and
run records on the file's mtime, engines on the config hash. Objects returned by
``st.cache_resource`` are shared across sessions, so they must be treated as read-only
(the core's KnowledgeBase, GoldenSet and EngineConfig are frozen).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import streamlit as st

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.tree import markdown_files, parse_kb
from workbench.answer.llm import LLMClient
from workbench.eval import golden, judgments
from workbench.eval.engines import EngineCache
from workbench.eval.evaluate import Evaluator
from workbench.eval.run_record import RunRecord, list_runs, load_run_record
from workbench.eval.saved_runs import saved_run_name
from workbench.tune.experiment_store import ExperimentStore
from workbench.workspace import Workspace, resolve

ENV = {
    "kb": "WIKIRAG_KB",
    "index": "WIKIRAG_INDEX",
    "dataset": "WIKIRAG_DATASET",
    "experiments": "WIKIRAG_EXPERIMENTS",
    "config": "WIKIRAG_CONFIG",
    "lang": "WIKIRAG_LANG",
}
DEFAULTS = {"kb": "wiki", "index": None, "dataset": None, "experiments": "experiments"}


def launch_args(argv: list[str] | None = None) -> dict[str, str | None]:
    """Where the app looks: CLI args after ``--`` win, then WIKIRAG_* env vars, then defaults."""
    p = argparse.ArgumentParser(add_help=False)
    for name in ENV:
        p.add_argument(f"--{name}", default=None)
    known, _ = p.parse_known_args(sys.argv[1:] if argv is None else argv)
    out: dict[str, str | None] = {}
    for name, env in ENV.items():
        out[name] = getattr(known, name) or os.environ.get(env) or DEFAULTS.get(name)
    return out


def workspace() -> Workspace:
    """The workspace of this app (re-resolved per run: a new baseline.yaml is picked up)."""
    a = launch_args()
    return resolve(
        kb=a["kb"] or "wiki",
        index=a["index"],
        config=a["config"],
        dataset=a["dataset"],
        experiments_root=a["experiments"] or "experiments",
    )


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0.0


def kb_fingerprint(root: Path) -> tuple[int, int]:
    """(file count, newest mtime) of the KB's Markdown files: changes when any file does."""
    files = markdown_files(root)
    return len(files), max((int(_mtime(f)) for f in files), default=0)


@st.cache_resource(show_spinner="Parsing the knowledge base…", max_entries=4)
def _kb(root: str, fingerprint_key: str) -> KnowledgeBase:
    return parse_kb(root)


def kb(ws: Workspace) -> KnowledgeBase:
    fp = kb_fingerprint(ws.kb)
    return _kb(str(ws.kb.resolve()), f"{fp[0]}:{fp[1]}")


@st.cache_data(show_spinner=False, max_entries=8)
def _golden(path: str, mtime: float, judgments_mtime: float) -> golden.GoldenSet:
    return golden.load(path)


def golden_set(ws: Workspace) -> golden.GoldenSet | None:
    """The saved golden set with its judgments, or None when the file does not exist yet."""
    if not ws.dataset.is_file():
        return None
    judged = judgments.path_for(ws.dataset)
    return _golden(str(ws.dataset), _mtime(ws.dataset), _mtime(judged) if judged.is_file() else 0.0)


@st.cache_resource(show_spinner=False)
def engine_cache() -> EngineCache:
    """The app's one engine cache, shared by every session: engines per (KB, index, config
    hash) and evaluation caches per index; models load once per process below it."""
    return EngineCache()


def engine(ws: Workspace, cfg: EngineConfig) -> Any:
    """One engine per (KB, index, config hash)."""
    cache = engine_cache()
    if cache.is_open(ws, cfg):
        return cache.engine(ws, cfg)
    with st.spinner("Opening the search engine…"):
        return cache.engine(ws, cfg)


def evaluator(ws: Workspace, cfg: EngineConfig) -> Evaluator:
    """An evaluator on ``cfg``'s engine, sharing the index's evaluation cache."""
    return engine_cache().evaluator(ws, cfg)


def forget_engines() -> None:
    """After a re-index: drop every cached engine so the next search sees the new index."""
    engine_cache().forget()
    _index_status.clear()


@st.cache_data(show_spinner=False, max_entries=16)
def _index_status(
    index: str, manifest_mtime: float, kb_key: str, cfg_yaml: str, _kb: KnowledgeBase
) -> dict[str, Any]:
    from engine.index_plan import freshness  # deferred: loads lancedb (~2 s)
    from engine.manifest import MANIFEST, read_manifest  # deferred: loads lancedb (~2 s)
    from engine.store import Location  # deferred: loads lancedb (~2 s)

    loc = Location(index)
    m = read_manifest(loc)
    fresh = freshness(_kb, EngineConfig.from_yaml(cfg_yaml), m)
    if m is None:
        return {"exists": False, **fresh, "manifest": str(Path(index) / MANIFEST)}
    return {
        "exists": True,
        **fresh,
        "embedder": m.signature,
        "updated_at": m.updated_at,
        "rows": len(m.nodes),
        "table": m.table,
        "version": m.version,
    }


def index_status(ws: Workspace, cfg: EngineConfig) -> dict[str, Any]:
    """Does an index exist, and how many chapters are new/changed/deleted since it was built."""
    knowledge = kb(ws)
    fp = kb_fingerprint(ws.kb)
    manifest = ws.index / "manifest.json"
    return _index_status(str(ws.index), _mtime(manifest), f"{fp}", cfg.to_yaml(), knowledge)


@st.cache_data(show_spinner=False, max_entries=64)
def _run_record(path: str, mtime: float) -> RunRecord:
    return load_run_record(path)


def run_record(path: Path) -> RunRecord:
    return _run_record(str(path), _mtime(path))


def run_paths(ws: Workspace) -> list[Path]:
    """Saved run records, newest first."""
    return list_runs(ws.runs_dir)


@st.cache_data(show_spinner=False, max_entries=512)
def _run_name(path: str, mtime: float) -> str:
    return saved_run_name(Path(path))


def run_names(paths: list[Path]) -> dict[str, str]:
    """Run id -> how the run is listed (config label · time); a name two runs share gets
    the run id after it, so a picker never shows two equal options."""
    names = {p.stem: _run_name(str(p), _mtime(p)) for p in paths}
    seen: dict[str, int] = {}
    for n in names.values():
        seen[n] = seen.get(n, 0) + 1
    return {i: n if seen[n] == 1 else f"{n} ({i})" for i, n in names.items()}


@st.cache_data(show_spinner=False, max_entries=16)
def _config_yaml(path: str, mtime: float) -> str:
    return EngineConfig.load(path).to_yaml()


def config_options(ws: Workspace) -> dict[str, str]:
    """Label -> config YAML for the sidebar picker: baseline, defaults, accepted versions."""
    out: dict[str, str] = {}
    if ws.config_path is not None and ws.config_path != ws.baseline_path:
        out[f"--config {ws.config_path.name}"] = _config_yaml(
            str(ws.config_path), _mtime(ws.config_path)
        )
    if ws.baseline_path.is_file():
        out["baseline"] = _config_yaml(str(ws.baseline_path), _mtime(ws.baseline_path))
    out["defaults"] = EngineConfig().to_yaml()
    store = ExperimentStore(ws.experiments)
    for v in reversed(store.accepted_versions()):
        p = Path(v["path"])
        # named as config specs name it (`wikirag compare v3 baseline`), in every language
        out[f"v{v['version']}"] = _config_yaml(str(p), _mtime(p))
    return out


@st.cache_resource(show_spinner=False, max_entries=4)
def _llm(llm_yaml: str, _cfg: EngineConfig) -> Any:
    return LLMClient.from_config(_cfg.llm)


def llm_client(cfg: EngineConfig) -> Any:
    """An LLM client when one is configured (config, env or .env), else None. A key the
    user has not approved for the config's host is a ConfigError (not cached: approving
    it with `wikirag keys allow` takes effect on the next rerun)."""
    return _llm(repr(cfg.llm), cfg)


def clear_data() -> None:
    """Forget cached file contents (after this app wrote files)."""
    _golden.clear()
    _run_record.clear()
    _config_yaml.clear()
    _index_status.clear()
