"""Lexical channel study: BM25F title weight, the lexical text's parts, query expansion.

    python benchmarks/bench_lexical.py --set NAME=KB_DIR,INDEX,DATASET [--set ...]
                                       [--out benchmarks/results/lexical.json]

Each set needs an index built with ``wikirag index`` (default embedder). Per set:

1. the vector channel and the expansion terms are computed once per query by the engine
   (``Engine.candidates``), exactly as ``wikirag eval`` gets them;
2. the BM25 channel is re-scored for every variant with ``engine.bm25_batch.BatchScorer``
   (bit-identical to the live channel) over token counts of the variant's lexical text,
   re-segmented from the KB when a variant drops part of the text (no re-embedding);
3. keyword, vector and hybrid (default RRF fusion) are then ranked and scored by
   ``workbench.eval.evaluate.Evaluator`` on those candidates, so the numbers are the ones
   ``wikirag eval`` reports for that config.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from engine.bm25_batch import BatchScorer
from engine.chapters import Node
from engine.config import EngineConfig
from engine.lexical import BM25Params, SparseBM25, title_tokens
from engine.pipeline import MAX_CACHED_POOL, Candidates
from engine.rows import lexical_text
from engine.search import Engine
from engine.tokenizer import tokenize
from workbench.eval.evaluate import Evaluator
from workbench.eval.golden import load as load_golden

MODES = ("keyword", "vector", "hybrid")
MEASURES = ("mrr", "hit@5")


def _text_variants() -> dict[str, Callable[[Node], str]]:
    """Which parts of the lexical text each variant keeps (``full`` is today's)."""

    def build(path: bool, title: bool, summary: bool) -> Callable[[Node], str]:
        def text(n: Node) -> str:
            head = []
            if path:
                head.append(f"path: {n.file_path}")
            if title:
                head.append(f"title: {' > '.join(n.breadcrumb)}")
            if summary:
                head.append(f"summary: {n.summary}")
            return "\n".join([*head, n.content])

        return text

    return {
        "full": lexical_text,
        "no_path": build(False, True, True),
        "no_summary": build(True, True, False),
        "no_path_no_summary": build(False, True, False),
        "content_only": build(False, False, False),
    }


@dataclass
class _Frozen:
    """An engine stand-in for the Evaluator: fixed candidates per query."""

    kb: Any
    cands: dict[str, Candidates]
    index_fingerprint: str = "bench"
    reranker_name: str | None = None

    def candidates(self, query: str, pool: int, filters: Any = None) -> Candidates:
        return self.cands[query]


def _score(engine: Engine, gs: Any, cfg: EngineConfig, cands: dict[str, Candidates]) -> dict:
    run = Evaluator(_Frozen(engine.kb, cands)).run(gs, cfg, modes=MODES, rerank=False)
    return {m: {k: round(run.means(m)[k], 4) for k in MEASURES} for m in MODES}


@dataclass
class Study:
    """What a lexical study scores against: the golden set, the engine and its snapshot,
    and each answerable query's vector candidates (computed once; only BM25 varies)."""

    gs: Any
    engine: Engine
    snap: Any
    queries: list[str]
    vec: dict[str, Any]


def open_study(
    kb_dir: str, index: str, dataset: str, base: EngineConfig, log: Callable[[str], None]
) -> Study:
    gs = load_golden(dataset)
    queries = [i.query for i in gs.answerable("all")]
    engine = Engine.open(kb_dir, index, base)
    t0 = time.perf_counter()
    vec = {q: engine.candidates(q, pool=MAX_CACHED_POOL, mode="vector").vector for q in queries}
    log(f"  vector candidates for {len(queries)} queries: {time.perf_counter() - t0:.1f}s")
    return Study(gs, engine, engine._shared.current().snapshot, queries, vec)


def study(kb_dir: str, index: str, dataset: str, log: Callable[[str], None]) -> dict:
    base = EngineConfig()
    st = open_study(kb_dir, index, dataset, base, log)
    gs, engine, snap, queries, vec = st.gs, st.engine, st.snap, st.queries, st.vec
    tok = base.lexical.tokenizer_spec
    pool = MAX_CACHED_POOL

    t0 = time.perf_counter()
    exp_on = base.with_overrides({"expansion.enabled": True})
    terms = {q: engine.with_config(exp_on).candidates(q, pool=1, mode="keyword") for q in queries}
    terms_of = {q: c.expansion_terms for q, c in terms.items()}
    log(f"  expansion terms for {len(queries)} queries: {time.perf_counter() - t0:.1f}s")

    def qtokens(expand: bool) -> list[list[str]]:
        out = []
        for q in queries:
            toks = tokenize(q, tok)
            if expand:
                for t in terms_of[q]:
                    toks.extend(tokenize(t, tok))
            out.append(toks)
        return out

    nodes = [engine.kb.nodes.get(i) for i in snap.ids]
    crumbs = [list(n.breadcrumb) if n else [] for n in nodes]
    titles = title_tokens(crumbs, tok)
    corpora: dict[str, SparseBM25] = {"full": snap.lexical}
    for name, fn in _text_variants().items():
        if name != "full":
            docs = [tokenize(fn(n), tok) if n else [] for n in nodes]
            corpora[name] = SparseBM25(docs, title_tokens=titles)

    scorers: dict[tuple[str, bool], BatchScorer] = {}

    def run(corpus: str, params: BM25Params, expand: bool) -> dict:
        key = (corpus, expand)
        if key not in scorers:
            scorers[key] = BatchScorer(corpora[corpus], qtokens(expand))
        t = time.process_time()
        hits = scorers[key].top_n(params, pool)
        ms = (time.process_time() - t) * 1000  # CPU ms: the wall clock is shared here
        cands = {
            q: Candidates(
                query=q,
                vector=vec[q],
                bm25=tuple((snap.ids[d], s) for d, s in h),
                expansion_terms=terms_of[q] if expand else (),
                pool=pool,
            )
            for q, h in zip(queries, hits, strict=True)
        }
        cfg = base.with_overrides(
            {
                "expansion.enabled": expand,
                "lexical.k1": params.k1,
                "lexical.b": params.b,
                "lexical.title_weight": params.title_weight,
                "lexical.title_b": params.title_b,
            }
        )
        out = _score(engine, gs, cfg, cands)
        out["batch_cpu_ms"] = round(ms, 1)
        return out

    rows: list[dict] = []

    def record(label: str, corpus: str, params: BM25Params, expand: bool) -> None:
        res = run(corpus, params, expand)
        rows.append({"label": label, "text": corpus, "expansion": expand, **vars(params), **res})
        log(
            f"  {label:38s} "
            + "  ".join(f"{m} {res[m]['mrr']:.4f}/{res[m]['hit@5']:.4f}" for m in MODES)
        )

    plain = BM25Params()
    record("expansion on (the old default)", "full", plain, True)
    record("expansion off", "full", plain, False)
    for corpus in corpora:
        if corpus != "full":
            record(f"text={corpus}", corpus, plain, False)
    for w in (0.5, 1.0, 2.0, 3.0, 5.0):
        for tb in (0.0, 0.5, 0.75, 1.0):
            record(
                f"title_weight={w} title_b={tb}",
                "full",
                replace(plain, title_weight=w, title_b=tb),
                False,
            )
    return {"queries": len(queries), "chapters": snap.rows, "rows": rows}


def batch_timing(n_docs: int = 14_000, n_queries: int = 1_000, settings: int = 10) -> dict:
    """Seconds per parameter setting of ``BatchScorer`` on a synthetic Zipf corpus.

    14k chapters of ~300 tokens over a 60k-term vocabulary, 1,000 queries of ~8 tokens
    drawn from the same law (the FAQ scale of issue 11), top 200 each.
    """
    import numpy as np

    rng = np.random.default_rng(0)
    vocab = [f"t{i}" for i in range(60_000)]

    def draw(k: int) -> list[str]:
        ids = np.minimum(rng.zipf(1.15, size=k), len(vocab)) - 1
        return [vocab[i] for i in ids]

    docs = [draw(int(rng.integers(50, 600))) for _ in range(n_docs)]
    titles = [draw(int(rng.integers(2, 12))) for _ in range(n_docs)]
    queries = [draw(int(rng.integers(3, 14))) for _ in range(n_queries)]
    bm = SparseBM25(docs, title_tokens=titles)
    t = time.perf_counter()
    scorer = BatchScorer(bm, queries)
    setup = time.perf_counter() - t
    grid = [
        BM25Params(k1=0.6 + 0.1 * i, b=0.3 + 0.03 * i, title_weight=0.5 * (i % 5), title_b=0.5)
        for i in range(settings)
    ]
    t, c = time.perf_counter(), time.process_time()
    for p in grid:
        scorer.top_n(p, MAX_CACHED_POOL)
    wall = (time.perf_counter() - t) / settings
    cpu = (time.process_time() - c) / settings
    # CPU seconds too: on a shared machine the wall clock mostly measures the neighbours.
    return {
        "docs": n_docs,
        "queries": n_queries,
        "top_n": MAX_CACHED_POOL,
        "setup_s": round(setup, 3),
        "per_setting_wall_s": round(wall, 3),
        "per_setting_cpu_s": round(cpu, 3),
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], metavar="NAME=KB,INDEX,DATASET")
    ap.add_argument("--timing", action="store_true", help="also time BatchScorer at 14k x 1k")
    ap.add_argument("--out", default="benchmarks/results/lexical.json")
    args = ap.parse_args(argv)
    results = {}
    for spec in args.set:
        name, _, rest = spec.partition("=")
        kb_dir, index, dataset = rest.split(",")
        print(f"{name}:", flush=True)
        results[name] = study(kb_dir, index, dataset, lambda s: print(s, flush=True))
    if args.timing:
        results["batch_timing"] = batch_timing()
        print("batch timing:", results["batch_timing"], flush=True)
    Path(args.out).write_text(json.dumps(results, ensure_ascii=False, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
