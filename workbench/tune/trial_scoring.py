"""Score many configs on one question set fast: channels cached apart, folds for CV.

A trial changes fusion, BM25, expansion, pool or mode. Re-running retrieval per query per
trial would cost seconds per trial, so each channel is cached by what it depends on:

- the vector channel depends on the embedder and the index only: one cached retrieval
  per query (the evaluator's cache, shared with `wikirag eval`), whatever the trial;
- expansion terms depend on the expansion settings: one cached retrieval per query per
  distinct expansion setting (none at all when expansion is off);
- the BM25 channel depends on the lexical settings and the expansion terms: computed for
  every query at once per distinct (lexical, expansion) setting, from tokens cut once.

Fusion is ``engine.pipeline.fuse``, the function live search and evaluation call, so a
trial's per-query value equals what `wikirag eval` reports for that config (tested).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

from engine.channels import query_tokens
from engine.config import EngineConfig
from engine.errors import EngineError
from engine.pipeline import MAX_CACHED_POOL, Candidates, fuse, pool_size
from workbench.eval import metrics as M
from workbench.eval.evaluate import EVAL_DEPTH, Evaluator
from workbench.eval.golden import GoldenItem

ProgressFn = Callable[[int, int, str], None]


def make_folds(ids: Sequence[str], k: int, seed: int) -> tuple[tuple[str, ...], ...]:
    """``k`` folds of query ids: sorted, shuffled by ``seed``, dealt round robin.

    The same ids and seed give the same folds in any input order; sizes differ by at most 1.
    """
    if k < 2:
        raise EngineError(f"cross-validation needs at least 2 folds, got {k}")
    if len(ids) < k:
        raise EngineError(
            f"{len(ids)} tune queries cannot be split into {k} folds; "
            "use fewer folds (--folds) or label more queries"
        )
    order = sorted(set(ids))
    random.Random(seed).shuffle(order)
    return tuple(tuple(sorted(order[f::k])) for f in range(k))


@dataclass
class ChannelBank:
    """Per-query channels for ``items``, each cached by the settings it depends on."""

    evaluator: Evaluator
    base: EngineConfig
    items: Sequence[GoldenItem]
    depth: int = MAX_CACHED_POOL  # candidates kept per channel (the deepest pool searched)
    progress: ProgressFn | None = None
    _vector: list[tuple[tuple[str, float], ...]] = field(default_factory=list, init=False)
    _script_share: list[float] = field(default_factory=list, init=False)  # per query, of the KB
    _terms: dict[str, list[tuple[str, ...]]] = field(default_factory=dict, init=False)
    _tokens: dict[str, list[list[str]]] = field(default_factory=dict, init=False)
    _bm25: dict[str, list[tuple[tuple[str, float], ...]]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        if self.depth > MAX_CACHED_POOL:
            raise EngineError(f"channel depth {self.depth} exceeds the cached {MAX_CACHED_POOL}")
        cands = self._retrieve(self.base, "vector channel")
        self._vector = [c.vector[: self.depth] for c in cands]
        self._script_share = [c.script_share for c in cands]
        self._terms[_expansion_key(self.base)] = [c.expansion_terms for c in cands]
        # The baseline's own BM25 channel came with the retrieval.
        self._bm25[_lexical_key(self.base)] = [c.bm25[: self.depth] for c in cands]

    def _retrieve(self, cfg: EngineConfig, label: str) -> list[Candidates]:
        out = []
        for n, item in enumerate(self.items, 1):
            out.append(self.evaluator.candidates(cfg, item.query)[0])
            if self.progress:
                self.progress(n, len(self.items), label)
        return out

    def terms(self, cfg: EngineConfig) -> list[tuple[str, ...]]:
        """Expansion terms per item under ``cfg.expansion`` (no retrieval when it is off)."""
        if not cfg.expansion.enabled or cfg.expansion.max_terms <= 0:
            return [() for _ in self.items]
        key = _expansion_key(cfg)
        if key not in self._terms:
            # Everything but the expansion stays the baseline's, so the evaluator's cache
            # keys this retrieval by the expansion setting alone.
            probe = self.base.with_overrides(
                {f"expansion.{k}": v for k, v in asdict(cfg.expansion).items()}
                | {"lexical.tokenizer": cfg.lexical.tokenizer}
            )
            self._terms[key] = [c.expansion_terms for c in self._retrieve(probe, "expansion")]
        return self._terms[key]

    def tokens(self, cfg: EngineConfig) -> list[list[str]]:
        """What the BM25 channel scores per item: query and expansion terms, segmented once."""
        key = _expansion_key(cfg) + cfg.lexical.tokenizer_spec
        if key not in self._tokens:
            tok = cfg.lexical.tokenizer_spec
            terms = self.terms(cfg)
            self._tokens[key] = [
                query_tokens(it.query, t, tok) for it, t in zip(self.items, terms, strict=True)
            ]
        return self._tokens[key]

    def bm25(self, cfg: EngineConfig) -> list[tuple[tuple[str, float], ...]]:
        """The BM25 channel per item under ``cfg``'s lexical and expansion settings."""
        key = _lexical_key(cfg)
        if key not in self._bm25:
            engine = self.evaluator.engine.with_config(cfg)
            hits = engine.keyword_channel(self.tokens(cfg), pool=self.depth)
            self._bm25[key] = [tuple(h) for h in hits]
        return self._bm25[key]

    def candidates(self, cfg: EngineConfig) -> list[Candidates]:
        """What ``Engine.candidates`` would return per item under ``cfg`` (timings aside)."""
        mode = cfg.search.mode
        terms = self.terms(cfg) if mode != "vector" else [() for _ in self.items]
        lexical = self.bm25(cfg) if mode != "vector" else [() for _ in self.items]
        vector = self._vector if mode != "keyword" else [() for _ in self.items]
        return [
            Candidates(it.query, v, b, t, self.depth, script_share=share)
            for it, v, b, t, share in zip(
                self.items, vector, lexical, terms, self._script_share, strict=True
            )
        ]


def _lexical_key(cfg: EngineConfig) -> str:
    return _expansion_key(cfg) + json.dumps(asdict(cfg.lexical), sort_keys=True)


def _expansion_key(cfg: EngineConfig) -> str:
    if not cfg.expansion.enabled or cfg.expansion.max_terms <= 0:
        return "off"
    return json.dumps([asdict(cfg.expansion), cfg.lexical.tokenizer_spec], sort_keys=True)


@dataclass
class TrialScorer:
    """Per-query values of one measure for a config, and their means per fold."""

    bank: ChannelBank
    folds: tuple[tuple[str, ...], ...]
    measure: str = "mrr"
    parent_of: Callable[[str], str | None] | None = None
    _memo: dict[str, dict[str, float]] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self._measure = M.parse_measure(self.measure)
        self.measure = str(self._measure)

    def per_query(self, cfg: EngineConfig) -> dict[str, float]:
        """query id -> value of the measure under ``cfg`` (memoised per config)."""
        if cfg.rerank.provider != "none":
            raise EngineError(
                "optimize re-scores without a reranker; set rerank.provider: none in the "
                "baseline, or try rerank settings one at a time with `wikirag experiment try`"
            )
        key = cfg.hash
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        top_k = cfg.search.top_k
        pool = pool_size(cfg, top_k, False)
        if pool > self.bank.depth:
            raise EngineError(f"pool {pool} is deeper than the cached {self.bank.depth}")
        depth = max(EVAL_DEPTH, top_k)
        mode = cfg.search.mode
        out: dict[str, float] = {}
        for item, cands in zip(self.bank.items, self.bank.candidates(cfg), strict=True):
            # Without rerank (and so without injection, which needs rerank scores) the
            # pipeline's ranking is the fused list cut at the depth; building its Ranked
            # items would cost most of a trial. tests/workbench/test_trial_scoring.py
            # checks these values against a full evaluation run.
            ids = [nid for nid, _ in fuse(cands, cfg, mode, pool)[:depth]]
            values = M.evaluate_query(
                ids,
                item.qrels,
                (self._measure,),
                self.parent_of,
                relevance_level=item.relevant_grade,
            )
            out[item.id] = values[self.measure]
        self._memo[key] = out
        return out

    def fold_scores(self, cfg: EngineConfig) -> list[float]:
        """Mean of the measure on each fold."""
        values = self.per_query(cfg)
        return [sum(values[q] for q in fold) / len(fold) for fold in self.folds]
