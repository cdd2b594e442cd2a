"""Evaluation runs: golden set x engine config -> per-query rankings, metrics, attribution.

The expensive work (query embedding, both retrieval channels, query expansion, rerank
scores) is cached by what can change it; fusion, rerank cut-off, injection and top-k are
applied by ``engine.pipeline.compose`` on the cached candidates. A live search calls the
same function, so a re-scored configuration gives exactly the numbers of a full run.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import pickle
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

import engine as engine_pkg
from engine.atomic import atomic_write_bytes
from engine.config import EngineConfig
from engine.pipeline import MAX_CACHED_POOL, Candidates, compose, pool_size
from workbench.eval import metrics as M
from workbench.eval.attribution import attribute
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord

EVAL_DEPTH = 20  # metrics go up to @20, so every run ranks at least this deep
ProgressFn = Callable[[int, int, str], None]


@functools.cache
def engine_code_fingerprint() -> str:
    """Hash of the engine's source: a code change (tokenizer, expansion) must not be served
    stale candidates from a cache written by the previous code."""
    root = Path(engine_pkg.__file__).parent
    h = hashlib.sha256()
    for path in sorted(root.glob("*.py")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:12]


@functools.lru_cache(maxsize=1024)
def retrieval_key(cfg: EngineConfig, index_fingerprint: str) -> str:
    """What the cached candidates depend on: ``EngineConfig.retrieval_identity``, the index
    build and the engine's code."""
    part = cfg.retrieval_identity()
    part["fingerprint"] = index_fingerprint
    part["code"] = engine_code_fingerprint()
    text = json.dumps(part, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass
class EvalCache:
    """Candidates per (retrieval key, query) and rerank scores per (model, query, node).

    Kept in memory and, when ``folder`` is given, pickled there (cache files are ours,
    not the user's: losing one only costs time).
    """

    folder: Path | None = None
    candidates: dict[tuple[str, str], tuple[Candidates, float]] = field(default_factory=dict)
    rerank: dict[tuple[str, str, str], float] = field(default_factory=dict)
    rerank_ms_per_pair: dict[str, float] = field(default_factory=dict)
    hits: int = 0
    misses: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def open(cls, folder: str | Path | None) -> EvalCache:
        cache = cls(Path(folder) if folder else None)
        if cache.folder and (cache.folder / "eval_cache.pkl").is_file():
            try:
                data = pickle.loads((cache.folder / "eval_cache.pkl").read_bytes())
                cache.candidates = data.get("candidates", {})
                cache.rerank = data.get("rerank", {})
                cache.rerank_ms_per_pair = data.get("rerank_ms_per_pair", {})
            except Exception:  # a corrupt cache is rebuilt, never fatal
                pass
        return cache

    def save(self) -> None:
        if not self.folder:
            return
        with self._lock:
            blob = pickle.dumps(
                {
                    "candidates": self.candidates,
                    "rerank": self.rerank,
                    "rerank_ms_per_pair": self.rerank_ms_per_pair,
                }
            )
        atomic_write_bytes(self.folder / "eval_cache.pkl", blob)


class EvaluatedEngine(Protocol):
    """What :class:`Evaluator` calls on an engine (``engine.search.Engine`` is one).

    Read when present: ``kb`` (the tree, for the hierarchical measures and child
    injection), ``index_fingerprint`` (part of the candidate cache's key),
    ``reranker_name``, ``warm_up()`` (model loading kept out of the first latency), and
    ``config`` with ``with_config(cfg)`` (an engine for another config of one index).
    """

    def candidates(self, query: str, *, pool: int) -> Candidates: ...

    def rerank_scores(self, query: str, node_ids: Sequence[str]) -> Mapping[str, float]: ...


E = TypeVar("E", bound=EvaluatedEngine)


class Evaluator(Generic[E]):
    """Runs golden sets through an engine, caching what parameter changes cannot alter.

    Generic in the engine so that callers keep its own type (``ev.engine.kb``)."""

    def __init__(self, engine: E, cache: EvalCache | None = None) -> None:
        self.engine = engine
        self.cache = cache or EvalCache()
        self._warm: set[int] = set()

    def _fingerprint(self) -> str:
        return str(getattr(self.engine, "index_fingerprint", "") or "")

    def candidates(self, cfg: EngineConfig, query: str) -> tuple[Candidates, float]:
        key = (retrieval_key(cfg, self._fingerprint()), query)
        top_k = cfg.search.top_k
        need = max(MAX_CACHED_POOL, pool_size(cfg, top_k, False), pool_size(cfg, top_k, True))
        hit = self.cache.candidates.get(key)
        if hit is not None and (hit[0].pool or MAX_CACHED_POOL) >= need:
            self.cache.hits += 1
            return hit
        self.cache.misses += 1
        eng = self._engine_for(cfg)
        if id(eng) not in self._warm:
            # Model loading must not land in the first query's latency.
            warm_up = getattr(eng, "warm_up", None)
            if warm_up is not None:
                warm_up()
            self._warm.add(id(eng))
        t0 = time.perf_counter()
        cands = eng.candidates(query, pool=need)  # deeper than the usual 200 when asked
        ms = (time.perf_counter() - t0) * 1000
        with self.cache._lock:
            self.cache.candidates[key] = (cands, ms)
        return cands, ms

    def rerank_scores(
        self, cfg: EngineConfig, query: str, node_ids: Sequence[str]
    ) -> tuple[dict[str, float], float]:
        """Scores for ``node_ids`` (cached per model), and the estimated rerank latency."""
        eng = self._engine_for(cfg)
        name = getattr(eng, "reranker_name", None) or cfg.rerank.provider
        missing = [n for n in node_ids if (name, query, n) not in self.cache.rerank]
        if missing:
            t0 = time.perf_counter()
            fresh = eng.rerank_scores(query, missing)
            ms = (time.perf_counter() - t0) * 1000
            with self.cache._lock:
                for nid, s in fresh.items():
                    self.cache.rerank[(name, query, nid)] = float(s)
                self.cache.rerank_ms_per_pair[name] = ms / max(1, len(missing))
        scores = {
            n: self.cache.rerank[(name, query, n)]
            for n in node_ids
            if (name, query, n) in self.cache.rerank
        }
        est = self.cache.rerank_ms_per_pair.get(name, 0.0) * len(node_ids)
        return scores, est

    def _engine_for(self, cfg: EngineConfig) -> EvaluatedEngine:
        with_config = getattr(self.engine, "with_config", None)
        if with_config is None or getattr(self.engine, "config", None) == cfg:
            return self.engine
        engine: EvaluatedEngine = with_config(cfg)
        return engine

    def evaluate_item(
        self, item: GoldenItem, cfg: EngineConfig, mode: str, use_rerank: bool
    ) -> QueryRecord:
        try:
            cands, cand_ms = self.candidates(cfg, item.query)
            rerank_ms = [0.0]  # estimated rerank latency (per-pair cost x head size)
            rerank_wall = [0.0]  # time the (possibly cached) call took here

            def rerank_head(head: Sequence[str]) -> Mapping[str, float]:
                t = time.perf_counter()
                scores, rerank_ms[0] = self.rerank_scores(cfg, item.query, head)
                rerank_wall[0] = (time.perf_counter() - t) * 1000
                return scores

            kb = getattr(self.engine, "kb", None)
            children_of = (lambda nid: kb.nodes[nid].children_ids) if kb is not None else None
            # Only the pure stages are timed here: retrieval (and warm-up, on a cache miss)
            # is already counted by the stage timings, and rerank by its estimate.
            t0 = time.perf_counter()
            composed = compose(
                cands,
                cfg,
                top_k=cfg.search.top_k,
                mode=mode,
                rerank=rerank_head if use_rerank else None,
                children_of=children_of,
                depth=max(EVAL_DEPTH, cfg.search.top_k),
            )
            rank_ms = (time.perf_counter() - t0) * 1000 - rerank_wall[0]
            ranked = composed.ranked
        except Exception as exc:  # one bad query must not sink a run; it is counted
            return QueryRecord(item, mode, (), _zero_metrics(), 0.0, (), None, error=str(exc))
        hierarchy = parent_function(getattr(self.engine, "kb", None))
        ids = [r.node_id for r in ranked]
        values = M.evaluate_query(
            ids, item.qrels, _measures(), hierarchy, relevance_level=item.relevant_grade
        )
        latency = _mode_latency(cands, cand_ms, mode) + rerank_ms[0] + min(rank_ms, 1000.0)
        latency = round(latency, 3)  # what the record keeps: a microsecond is noise here
        fusion_ranks = {nid: i + 1 for i, (nid, _) in enumerate(composed.fused)}
        attribution = attribute(
            item, ranked, cands, composed.pool, mode, use_rerank, fusion_ranks=fusion_ranks
        )
        cause = attribution[0].cause if attribution else None
        return QueryRecord(item, mode, tuple(ranked), values, latency, attribution, cause)

    def run(
        self,
        gs: GoldenSet,
        cfg: EngineConfig,
        *,
        modes: Iterable[str] = ("hybrid",),
        rerank: bool | None = None,
        split: str = "all",
        progress: ProgressFn | None = None,
        kb_name: str = "",
        item_ids: Iterable[str] | None = None,
    ) -> RunRecord:
        use_rerank = (cfg.rerank.provider != "none") if rerank is None else bool(rerank)
        modes = tuple(modes)
        items = gs.answerable(split)
        if item_ids is not None:
            wanted = set(item_ids)
            items = [i for i in items if i.id in wanted]
        hits0, misses0 = self.cache.hits, self.cache.misses
        t0 = time.perf_counter()
        results: list[QueryRecord] = []
        total = len(items) * len(modes)
        done = 0
        for item in items:
            for mode in modes:
                results.append(self.evaluate_item(item, cfg, mode, use_rerank))
                done += 1
                if progress:
                    progress(done, total, item.id)
        created = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        run_id = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S-") + cfg.hash[:6]
        return RunRecord.of(
            cfg,
            results,
            run_id=run_id,
            created=created,
            dataset=DatasetRef(gs.name, str(gs.path or ""), gs.content_hash),
            split=split,
            modes=modes,
            rerank=use_rerank,
            kb=kb_name,
            index_fingerprint=self._fingerprint(),
            seconds=round(time.perf_counter() - t0, 3),
            cache_hits=self.cache.hits - hits0,
            cache_misses=self.cache.misses - misses0,
        )


def _measures() -> tuple[M.Measure, ...]:
    return M.default_measures()


def _zero_metrics() -> dict[str, float]:
    return {str(m): 0.0 for m in _measures()}


def parent_function(kb: Any) -> Callable[[str], str | None] | None:
    """The tree's parent relation for the hierarchical measures (None without a KB)."""
    if kb is None:
        return None
    nodes = kb.nodes

    def parent_of(nid: str) -> str | None:
        node = nodes.get(nid)
        return node.parent_id if node is not None else None

    return parent_of


def _mode_latency(cands: Candidates, cand_ms: float, mode: str) -> float:
    """The part of candidate time a mode needs; stage timings come from the engine."""
    t = dict(cands.timings or {})
    if not t:
        return cand_ms
    stages = {
        "vector": ("embed", "vector"),
        "keyword": ("expand", "bm25"),
        "hybrid": ("expand", "embed", "vector", "bm25"),
    }[mode]
    return sum(float(t.get(s, 0.0)) for s in stages) or cand_ms


__all__ = [
    "EvalCache",
    "EvaluatedEngine",
    "Evaluator",
]
