"""Keyword-channel study: English stemming (``lexical.stem``), extra stop words, k1/b/title.

    python benchmarks/bench_stemming.py --set NAME=KB_DIR,INDEX,DATASET [--set ...]
                                        [--grid NAME] [--out benchmarks/results/stemming.json]

Each set needs an index built with ``wikirag index`` (unstemmed; default embedder for
hybrid numbers, ``embedding.provider=hash`` when only keyword numbers matter). Per set:

1. the vector candidates are computed once per query by the engine (``Engine.candidates``);
2. the chapters' lexical text (``engine.rows.lexical_text``, what the indexer tokenizes)
   and breadcrumbs are re-tokenized with and without ``+stem`` (the unstemmed counts are
   checked equal to the index's own), and the BM25 channel is re-scored by
   ``engine.lexical.BatchScorer`` (bit-identical to the live channel);
3. keyword, vector and hybrid (the default fusion) are ranked and scored by
   ``workbench.eval.evaluate.Evaluator``, so the numbers are those ``wikirag eval`` reports.

Tokenization CPU time with and without stemming (cold stem cache) is recorded per set.
``--grid NAME`` also sweeps k1, b and title_weight on that set, stem off and on.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from bench_lexical import MODES, _score, open_study

from engine.bm25_batch import BatchScorer
from engine.config import EngineConfig, parse_override
from engine.lexical import BM25Params, SparseBM25, title_tokens
from engine.pipeline import MAX_CACHED_POOL, Candidates
from engine.rows import lexical_text
from engine.tokenizer import stem_word, tokenize

# English function words missing from engine.tokenizer.STOP_WORDS (pronoun forms,
# conjunctions, prepositions, quantifier pronouns): the "extra stop words" candidate.
EXTRA_STOP = frozenset(
    [
        "am",
        "being",
        "but",
        "cannot",
        "nor",
        "off",
        "once",
        "onto",
        "upon",
        "until",
        "whether",
        "yet",
        "hers",
        "him",
        "himself",
        "herself",
        "itself",
        "myself",
        "ourselves",
        "themselves",
        "yourself",
        "yourselves",
        "mine",
        "ours",
        "yours",
        "again",
        "against",
        "already",
        "although",
        "though",
        "however",
        "therefore",
        "thus",
        "hence",
        "either",
        "neither",
        "else",
        "ever",
        "even",
        "still",
        "toward",
        "towards",
        "among",
        "above",
        "below",
        "across",
        "along",
        "around",
        "behind",
        "beyond",
        "since",
        "rather",
        "quite",
        "something",
        "anything",
        "everything",
        "nothing",
        "someone",
        "anyone",
        "everyone",
        "eg",
        "ie",
    ]
)


def _variant_tokens(text: str, mode: str, stem: bool, extra_stop: bool) -> list[str]:
    if not extra_stop:
        return tokenize(text, f"{mode}+stem" if stem else mode)
    toks = [t for t in tokenize(text, mode) if t not in EXTRA_STOP]
    return [stem_word(t) if stem else t for t in toks]


def study(
    kb_dir: str,
    index: str,
    dataset: str,
    grid: bool,
    log: Callable[[str], None],
    base: EngineConfig | None = None,
) -> dict:
    base = base or EngineConfig()
    st = open_study(kb_dir, index, dataset, base, log)
    gs, engine, snap, queries, vec = st.gs, st.engine, st.snap, st.queries, st.vec
    mode = base.lexical.tokenizer
    pool = MAX_CACHED_POOL

    nodes = [engine.kb.nodes.get(i) for i in snap.ids]
    texts = [lexical_text(n) if n else "" for n in nodes]
    crumbs = [list(n.breadcrumb) if n else [] for n in nodes]

    variants = {
        "stem off": (False, False),
        "stem on": (True, False),
        "stem off + extra stop words": (False, True),
        "stem on + extra stop words": (True, True),
    }
    corpora: dict[str, SparseBM25] = {}
    qtoks: dict[str, list[list[str]]] = {}
    timing: dict[str, float] = {}
    for name, (stem, extra) in variants.items():
        stem_word.cache_clear()
        t = time.process_time()
        docs = [_variant_tokens(x, mode, stem, extra) for x in texts]
        if not extra:
            timing[name] = round(time.process_time() - t, 2)  # CPU s: the wall clock is shared
        titles = [
            [w for w in crumb if not (extra and w in EXTRA_STOP)]
            for crumb in title_tokens(crumbs, f"{mode}+stem" if stem else mode)
        ]
        corpora[name] = SparseBM25(docs, title_tokens=titles)
        qtoks[name] = [_variant_tokens(q, mode, stem, extra) for q in queries]
    off = corpora["stem off"]
    same = off.terms == snap.lexical.terms and (off.counts != snap.lexical.counts).nnz == 0
    log(f"  unstemmed re-tokenization equals the index's counts: {same}")
    n_tok = int(off.doc_len.sum())
    log(f"  tokenize CPU s ({n_tok} tokens): {timing}")

    def run(name: str, params: BM25Params) -> dict:
        hits = BatchScorer(corpora[name], qtoks[name]).top_n(params, pool)
        cands = {
            q: Candidates(
                query=q,
                vector=vec[q],
                bm25=tuple((snap.ids[d], s) for d, s in h),
                expansion_terms=(),
                pool=pool,
            )
            for q, h in zip(queries, hits, strict=True)
        }
        cfg = base.with_overrides(
            {
                "lexical.k1": params.k1,
                "lexical.b": params.b,
                "lexical.title_weight": params.title_weight,
                "lexical.title_b": params.title_b,
            }
        )
        return _score(engine, gs, cfg, cands)

    default = BM25Params(
        k1=base.lexical.k1,
        b=base.lexical.b,
        title_weight=base.lexical.title_weight,
        title_b=base.lexical.title_b,
    )
    rows = []
    for name in variants:
        res = run(name, default)
        rows.append({"variant": name, **vars(default), **res})
        log(
            f"  {name:30s} "
            + "  ".join(f"{m} {res[m]['mrr']:.4f}/{res[m]['hit@5']:.4f}" for m in MODES)
        )
    out: dict = {
        "queries": len(queries),
        "chapters": snap.rows,
        "tokens": n_tok,
        "unstemmed_equals_index": bool(same),
        "tokenize_cpu_s": timing,
        "rows": rows,
    }
    if grid:
        sweep = []
        for name in ("stem off", "stem on"):
            for k1, b, tw in itertools.product(
                (0.9, 1.2, 1.5, 2.0), (0.3, 0.5, 0.75, 0.9), (0.0, 1.0, 2.0, 3.0, 5.0)
            ):
                p = BM25Params(k1=k1, b=b, title_weight=tw, title_b=default.title_b)
                res = run(name, p)
                sweep.append({"variant": name, **vars(p), **res})
            best = max(
                (r for r in sweep if r["variant"] == name),
                key=lambda r: (r["keyword"]["mrr"], r["keyword"]["hit@5"]),
            )
            log(
                f"  grid best keyword MRR, {name}: k1={best['k1']} b={best['b']} "
                f"title_weight={best['title_weight']}: {best['keyword']} hybrid {best['hybrid']}"
            )
        out["grid"] = sweep
    return out


def stem_throughput(n_words: int = 200_000) -> dict:
    """Stemming cost per token, cold and cached, on a Zipf draw over English-like words."""
    rng = np.random.default_rng(0)
    vocab = [
        "".join(rng.choice(list("abcdefghijklmnoprstu"), size=int(k))) + "ing"
        for k in rng.integers(3, 9, size=20_000)
    ]
    ids = np.minimum(rng.zipf(1.2, size=n_words), len(vocab)) - 1
    words = [vocab[i] for i in ids]
    stem_word.cache_clear()
    t = time.process_time()
    for w in words:
        stem_word(w)
    cold = time.process_time() - t
    t = time.process_time()
    for w in words:
        stem_word(w)
    warm = time.process_time() - t
    return {
        "words": n_words,
        "distinct": len(set(words)),
        "cold_us_per_word": round(cold / n_words * 1e6, 2),
        "cached_us_per_word": round(warm / n_words * 1e6, 2),
    }


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], metavar="NAME=KB,INDEX,DATASET")
    ap.add_argument("--grid", action="append", default=[], metavar="NAME")
    ap.add_argument("--override", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default="benchmarks/results/stemming.json")
    args = ap.parse_args(argv)
    base = EngineConfig().with_overrides(dict(parse_override(o) for o in args.override))
    results: dict = {"stem_throughput": stem_throughput()}
    print("stem throughput:", results["stem_throughput"], flush=True)
    for spec in args.set:
        name, _, rest = spec.partition("=")
        kb_dir, index, dataset = rest.split(",")
        print(f"{name}:", flush=True)
        results[name] = study(
            kb_dir, index, dataset, name in args.grid, lambda s: print(s, flush=True), base
        )
    Path(args.out).write_text(json.dumps(results, ensure_ascii=False, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
