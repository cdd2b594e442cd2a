from __future__ import annotations

import random

import pytest

from engine.errors import EngineError
from engine.search import Engine
from tests.engine.engine_kit import HASH_CFG
from tests.workbench import synthetic_kb
from workbench.eval import golden
from workbench.eval.evaluate import EvalCache, Evaluator, parent_function
from workbench.tune.trial_scoring import ChannelBank, TrialScorer, make_folds


def test_folds_partition_the_ids_deterministically() -> None:
    ids = [f"q{i:03d}" for i in range(23)]
    folds = make_folds(ids, 5, seed=7)
    assert sorted(q for f in folds for q in f) == ids
    assert sorted(len(f) for f in folds) == [4, 4, 5, 5, 5]
    shuffled = list(ids)
    random.Random(1).shuffle(shuffled)
    assert make_folds(shuffled, 5, seed=7) == folds  # input order does not matter
    assert make_folds(ids, 5, seed=8) != folds  # the seed does


@pytest.mark.parametrize("k", [1, 30])
def test_folds_refuse_impossible_splits(k: int) -> None:
    with pytest.raises(EngineError, match="fold"):
        make_folds([f"q{i}" for i in range(10)], k, seed=0)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("trials")
    kb, path = synthetic_kb.write(root)
    index = root / ".wikirag" / "kb"
    return Engine.open(kb, index, HASH_CFG), golden.load(path), (kb, index)


CONFIGS = [
    {},
    {"fusion.k": 5.0, "fusion.bm25_weight": 3.0},
    {"fusion.multiplier": 1},
    {"search.mode": "vector"},
    {"search.mode": "keyword", "lexical.k1": 0.6, "lexical.b": 0.2},
    {"expansion.enabled": False},
    {"expansion.enabled": False, "lexical.k1": 2.5, "fusion.bm25_weight": 0.1},
    {"expansion.max_terms": 2},
    {"search.top_k": 3, "fusion.multiplier": 7},
    {"fusion.method": "convex", "fusion.normalization": "zscore", "fusion.bm25_weight": 2.0},
    {"fusion.method": "convex", "fusion.normalization": "tmm", "expansion.enabled": False},
    {"fusion.method": "dbsf", "fusion.multiplier": 5, "lexical.b": 0.3},
    {"lexical.title_weight": 0.0, "expansion.enabled": True},
    {"lexical.title_weight": 4.5, "lexical.title_b": 0.2, "search.mode": "keyword"},
]


@pytest.mark.parametrize("overrides", CONFIGS)
def test_trial_values_equal_a_full_evaluation(setup, overrides) -> None:
    engine, gs, (kb, index) = setup
    items = gs.answerable("tune")
    cache = EvalCache()
    bank = ChannelBank(Evaluator(engine, cache), HASH_CFG, items, depth=100)
    folds = make_folds([i.id for i in items], 3, seed=0)
    scorer = TrialScorer(bank, folds, "mrr", parent_function(engine.kb))
    cfg = HASH_CFG.with_overrides(overrides)
    mode = cfg.search.mode
    full = Evaluator(Engine.open(kb, index, cfg), EvalCache())  # nothing cached
    run = full.run(gs, cfg, modes=[mode], split="tune")
    want = {q: m["mrr"] for q, m in run.per_query(mode).items()}
    assert scorer.per_query(cfg) == want
    fold_means = scorer.fold_scores(cfg)
    assert fold_means == [sum(want[q] for q in f) / len(f) for f in folds]


def test_bm25_settings_reuse_the_vector_channel(setup) -> None:
    engine, gs, _ = setup
    items = gs.answerable("tune")
    cache = EvalCache()
    bank = ChannelBank(Evaluator(engine, cache), HASH_CFG, items, depth=50)
    misses = cache.misses
    assert misses == len(items)  # one retrieval per query for the vector channel
    scorer = TrialScorer(bank, make_folds([i.id for i in items], 3, seed=0))
    for k1 in (0.5, 1.0, 2.0):
        scorer.per_query(HASH_CFG.with_overrides({"lexical.k1": k1, "search.mode": "keyword"}))
    scorer.per_query(HASH_CFG.with_overrides({"expansion.enabled": False}))
    assert cache.misses == misses  # no retrieval at all for BM25 or expansion-off trials


def test_trial_values_on_a_stemmed_index_equal_a_full_evaluation(setup, tmp_path) -> None:
    from engine.indexer import build_index
    from engine.tree import parse_kb

    _, gs, (kb, _) = setup
    stem = HASH_CFG.with_overrides({"lexical.stem": True})
    index = tmp_path / "stemmed"
    build_index(parse_kb(kb), stem, str(index))
    engine = Engine.open(kb, index, stem)
    items = gs.answerable("tune")
    bank = ChannelBank(Evaluator(engine, EvalCache()), stem, items, depth=100)
    scorer = TrialScorer(bank, make_folds([i.id for i in items], 3, seed=0))
    # Query tokens are stemmed like the index's ("retrieval pipeline" in the filler)...
    cfg = stem.with_overrides({"search.mode": "keyword", "lexical.k1": 0.9})
    assert all("retriev" in toks and "retrieval" not in toks for toks in bank.tokens(cfg))
    # ...so a BM25-only trial equals a live evaluation.
    run = Evaluator(Engine.open(kb, index, cfg), EvalCache()).run(
        gs, cfg, modes=["keyword"], split="tune"
    )
    assert scorer.per_query(cfg) == {q: m["mrr"] for q, m in run.per_query("keyword").items()}


def test_cross_lingual_trials_equal_a_full_evaluation(tmp_path) -> None:
    """English questions over a mostly Chinese KB: a trial re-fuses with each query's script
    share from the bank, so fusion.cross_lingual_bm25 scores as a live evaluation does."""
    import yaml

    from engine.indexer import build_index
    from engine.tree import parse_kb
    from tests.engine.engine_kit import TINY_KB, write_kb

    english = {"api/http.md": "# HTTP API\n\nRerank and chunking endpoints return JSON.\n"}
    kb = write_kb(tmp_path / "kb", {**TINY_KB, **english})
    index = tmp_path / "idx"
    build_index(parse_kb(kb), HASH_CFG, str(index))
    engine = Engine.open(kb, index, HASH_CFG)
    leaves = sorted(n for n, node in engine.kb.nodes.items() if node.level >= 2)
    questions = ["How does rerank work?", "What is chunking?", "重排怎么做", "切块策略是什么"]
    queries = [
        {"id": f"x{i}", "query": q, "relevant": [leaves[i % len(leaves)]], "split": "tune"}
        for i, q in enumerate(questions * 3)
    ]
    path = tmp_path / "set.yaml"
    path.write_text(yaml.safe_dump({"name": "x", "queries": queries}, allow_unicode=True))
    gs = golden.load(path)
    items = gs.answerable("tune")
    bank = ChannelBank(Evaluator(engine, EvalCache()), HASH_CFG, items, depth=100)
    assert [round(c.script_share, 3) for c in bank.candidates(HASH_CFG)][:3] == [
        pytest.approx(0.2, abs=0.2),
        pytest.approx(0.2, abs=0.2),
        pytest.approx(0.8, abs=0.2),
    ]
    scorer = TrialScorer(bank, make_folds([i.id for i in items], 3, seed=0))
    values = {}
    for weight in (0.0, 1.0):
        cfg = HASH_CFG.with_overrides({"fusion.cross_lingual_bm25": weight})
        run = Evaluator(Engine.open(kb, index, cfg), EvalCache()).run(
            gs, cfg, modes=["hybrid"], split="tune"
        )
        values[weight] = scorer.per_query(cfg)
        assert values[weight] == {q: m["mrr"] for q, m in run.per_query("hybrid").items()}
    assert any(values[0.0][q] != values[1.0][q] for q in values[0.0])  # the key moved a query
