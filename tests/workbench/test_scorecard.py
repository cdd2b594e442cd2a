import pytest

from engine.chapters import Document, KnowledgeBase, Node
from engine.config import EngineConfig
from workbench.eval.attribution import Attribution
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord
from workbench.tune.corpus_dimensions import chunking_evidence
from workbench.tune.dimension import WEIGHTS, piecewise
from workbench.tune.engineering_dimension import engineering_evidence
from workbench.tune.retrieval_dimensions import RECALL5_BANDS
from workbench.tune.scorecard import build_scorecard, grade_for

CATS = ["a", "a", "a", "b", "b"]
DIFFS = ["easy", "medium", "medium", "medium", "hard"]


def _items():
    rel = ["d1#h1/long", "d1#h1/ok", "d1#h1", "d2#only", "d1#gone"]  # the last one is stale
    return [GoldenItem(f"q{n}", f"query {n}", (rel[n],), DIFFS[n], CATS[n]) for n in range(5)]


def _miss(cause, vector_rank=None, bm25_rank=None):
    return Attribution("", cause, None, None, vector_rank, bm25_rank, None, None)


def _run(rows, mode="hybrid", rerank=False, cfg=None, causes=None, attribution=None, errors=()):
    """rows: per query {measure: value}."""
    results = []
    for n, (item, m) in enumerate(zip(_items(), rows, strict=True)):
        cause = (causes or {}).get(n)
        attr = (attribution or {}).get(n, [_miss(cause)] if cause else [])
        err = "boom" if n in errors else None
        results.append(QueryRecord(item, mode, [], dict(m), 10.0, attr, cause, err))
    return RunRecord.of(
        cfg or EngineConfig(),
        results,
        run_id="r1",
        created="t",
        dataset=DatasetRef("gs", "", "h"),
        split="all",
        modes=(mode,),
        rerank=rerank,
    )


def _rows(recall, mrr, hit):
    return [{"recall@5": r, "mrr": m, "hit@5": h} for r, m, h in zip(recall, mrr, hit, strict=True)]


MAIN = _rows([1, 1, 0.5, 0.5, 0.5], [1, 1, 0.5, 0.25, 0.25], [1, 1, 1, 0, 0])  # 0.7, 0.6, 0.6
VECTOR = _rows([1, 0.8, 0.5, 0.5, 0], [0] * 5, [0] * 5)  # recall@5 0.56 = 0.8 x 0.7


def _node(nid, doc, level, parent, children=(), chars=200, fm=None):
    return Node(
        node_id=nid,
        doc_id=doc,
        title=nid,
        level=level,
        ordinal=0,
        parent_id=parent,
        children_ids=tuple(children),
        breadcrumb=(nid,),
        line=1,
        anchor=nid,
        content="x" * chars,
        summary="",
        file_path=f"{doc}.md",
        frontmatter=fm or {},
    )


def _kb():
    fm = {"category": "rag"}
    d1 = Document(
        "d1",
        "d1.md",
        fm,
        (
            _node("d1", "d1", 0, None, ["d1#h1"], chars=0, fm=fm),
            _node("d1#h1", "d1", 1, "d1", ["d1#h1/long", "d1#h1/ok"], fm=fm),
            _node("d1#h1/long", "d1", 2, "d1#h1", chars=3000, fm=fm),
            _node("d1#h1/ok", "d1", 2, "d1#h1", chars=100, fm=fm),
        ),
    )
    d2 = Document(
        "d2",
        "d2.md",
        {},
        (
            _node("d2", "d2", 0, None, ["d2#only"], chars=0),
            _node("d2#only", "d2", 1, "d2", chars=50),
        ),
    )
    return KnowledgeBase("kb", (d1, d2))


FRESH = {
    "freshness": {"new": 0, "changed": 0, "deleted": 0, "fresh": True},
    "index": {"rows": 6},
    "signature_match": True,
}


def _card(**kw):
    args = {
        "kb": _kb(),
        "gs": GoldenSet("gs", tuple(_items())),
        "engine_stats": FRESH,
        "extra_runs": {"vector": _run(VECTOR, mode="vector")},
    }
    args.update(kw)
    run = args.pop("run", None) or _run(MAIN)
    return build_scorecard(run, **args)


def test_weights_sum_to_100():
    assert sum(WEIGHTS.values()) == 100


@pytest.mark.parametrize(
    ("x", "score"), [(0.0, 0.0), (0.25, 25.0), (0.5, 50.0), (0.7, 75.0), (0.9, 100.0), (1.0, 100.0)]
)
def test_recall_bands(x, score):
    assert piecewise(x, RECALL5_BANDS) == pytest.approx(score)


@pytest.mark.parametrize(
    ("total", "grade"),
    [
        (100, "A"),
        (90, "A"),
        (89.99, "B"),
        (80, "B"),
        (79.99, "C+"),
        (70, "C+"),
        (69.99, "C"),
        (60, "C"),
        (59.99, "D"),
        (50, "D"),
        (49.99, "F"),
        (0, "F"),
    ],
)
def test_grade_boundaries(total, grade):
    assert grade_for(total) == grade


def test_every_dimension_from_constructed_evidence():
    card = _card()
    s = {d.key: d.score for d in card.dimensions}
    assert s["recall5"] == pytest.approx(75.0)  # 0.7 on (0.5 -> 50, 0.9 -> 100)
    assert s["mrr"] == pytest.approx(75.0)  # 0.6 on (0.4 -> 50, 0.8 -> 100)
    assert s["hit5"] == pytest.approx(50.0)  # 0.6 on (0.6 -> 50)
    assert s["embedding"] == pytest.approx(80.0)  # ratio 0.56 / 0.7 = 0.8 -> 80
    assert s["rerank"] == pytest.approx(50.0)  # rerank off
    # long 1/4, short 1/3 leaves, no-H2 1/2 docs: 100 - 25 - 33.33 - 25
    assert s["chunking"] == pytest.approx(16.67)
    # hybrid helps (MRR 0.6 vs vector 0.0) 25 + filters 15 of the 40 measured points
    assert s["architecture"] == pytest.approx(100.0)
    assert s["engineering"] == pytest.approx(100.0)
    # 40*5/30 + 20*(2/2) + 20*(1 - 2*0.1) + 20*(1 - 1/5)
    assert s["coverage"] == pytest.approx(40 * 5 / 30 + 20 + 16 + 16, abs=0.01)
    total = sum(WEIGHTS[k] * v for k, v in s.items()) / 100
    assert card.total == pytest.approx(round(total, 2))
    assert card.total == pytest.approx(67.6, abs=0.01)
    assert card.grade == "C"


def test_evidence_and_formula_are_shown():
    card = _card()
    emb = card.dimension("embedding")
    assert emb.evidence["ratio"] == pytest.approx(0.8)
    assert "recall@5(vector only) / recall@5(hybrid)" in str(emb.formula)
    rr = card.dimension("rerank")
    assert str(rr.evidence["rerank"]) == "off"
    assert rr.next_experiment["overrides"] == {"rerank.provider": "onnx-cross-encoder"}
    assert card.dimension("chunking").evidence["long_share"] == 0.25
    cov = card.dimension("coverage").evidence
    assert cov["bad_labels"] == 1 and cov["difficulty_mix"] == {"easy": 1, "medium": 3, "hard": 1}
    for d in card.dimensions:
        assert str(d.formula) and str(d.rule)


def test_weaknesses_rank_by_weighted_loss():
    card = _card()
    # losses: chunking 10*83.33, recall 25*25, hit 10*50 = rerank 10*50 (tie -> key order)
    assert [d.key for d in card.weaknesses] == ["chunking", "recall5", "hit5"]
    cfg = EngineConfig()
    for d in card.weaknesses:
        exp = d.next_experiment
        if exp:
            assert cfg.diff(cfg.with_overrides(exp["overrides"]))  # runnable, changes something
    assert card.dimension("recall5").next_experiment["overrides"] == {"fusion.multiplier": 5}


def test_rerank_effect_measured_against_rerank_off():
    cfg = EngineConfig().with_overrides({"rerank.provider": "onnx-cross-encoder"})
    on = _run(MAIN, rerank=True, cfg=cfg)  # recall 0.7, mrr 0.6
    off = _run(_rows([1, 1, 0.5, 0.5, 0.25], [1, 1, 0.25, 0.25, 0.0], [1] * 5), cfg=cfg)
    card = _card(run=on, extra_runs={"vector": _run(VECTOR, "vector"), "no_rerank": off})
    d = card.dimension("rerank")
    # d = (0.05 + 0.1) / 2 = 0.075 -> 50 + 0.075 / 0.1 * 50
    assert d.evidence["d"] == pytest.approx(0.075)
    assert d.score == pytest.approx(87.5)
    assert d.next_experiment["overrides"] == {"rerank.max_candidates": 50}
    # the embedding ratio uses the rerank-off hybrid run: 0.56 / 0.65
    assert card.dimension("embedding").evidence["hybrid_recall@5"] == pytest.approx(0.65)


def test_rerank_that_hurts_suggests_blending():
    cfg = EngineConfig().with_overrides({"rerank.provider": "onnx-cross-encoder"})
    on = _run(MAIN, rerank=True, cfg=cfg)
    off = _run(_rows([1, 1, 1, 1, 1], [1, 1, 1, 1, 1], [1] * 5), cfg=cfg)
    d = _card(run=on, extra_runs={"no_rerank": off}).dimension("rerank")
    assert d.score == pytest.approx(0.0)  # d = (-0.3 - 0.4) / 2 <= -0.1
    assert d.next_experiment["overrides"] == {"rerank.weight": 0.5}


def test_unmeasured_embedding_scores_zero_with_reason():
    d = _card(extra_runs={}).dimension("embedding")
    assert d.score == 0.0 and d.evidence == {"measured": False}
    assert "not measured" in str(d.rule)


def test_dropped_by_fusion_targets_the_channel_that_had_it():
    attribution = {
        0: [_miss("dropped_by_fusion", vector_rank=9, bm25_rank=2)],
        1: [_miss("dropped_by_fusion", bm25_rank=4)],
    }
    run = _run(
        MAIN, causes={0: "dropped_by_fusion", 1: "dropped_by_fusion"}, attribution=attribution
    )
    d = _card(run=run).dimension("recall5")
    doubled = 2 * EngineConfig().fusion.bm25_weight  # twice the weight of the channel that had it
    assert d.next_experiment["overrides"] == {"fusion.bm25_weight": doubled}


def test_engineering_stale_index_unknown_signature_and_errors():
    stats = {
        "freshness": {"new": 1, "changed": 0, "deleted": 0, "fresh": False},
        "index": {"rows": 20},
    }
    d = _card(run=_run(MAIN, errors=(0,)), engine_stats=stats).dimension("engineering")
    # 50*(1 - 10*1/20) + 0 (signature not reported) + 20*max(0, 1 - 10*1/5)
    assert d.score == pytest.approx(25.0)
    assert d.evidence["stale_nodes"] == 1 and d.evidence["signature_match"] is None
    assert "wikirag index" in str(d.action)


def test_engineering_evidence_reads_engine_stats_shape():
    ev = engineering_evidence(FRESH)
    assert ev == {"fresh": True, "stale_nodes": 0, "indexed_nodes": 6, "signature_match": True}
    assert engineering_evidence({})["fresh"] is None


def test_chunking_evidence_counts():
    ev = chunking_evidence(_kb())
    assert ev["chapters"] == 4 and ev["documents"] == 2
    assert ev["short_share"] == round(1 / 3, 4) and ev["no_h2_share"] == 0.5
    assert ev["max_depth"] == 2


def test_architecture_scores_what_capabilities_contribute_not_what_is_switched_on():
    better_keyword = _rows([1, 1, 1, 0.5, 0.5], [1, 1, 1, 0.5, 0.5], [1, 1, 1, 1, 1])
    no_expansion = _rows([1, 1, 0.5, 0.5, 0.5], [1, 1, 1, 0.5, 0.5], [1, 1, 1, 1, 1])
    expanding = EngineConfig().with_overrides({"expansion.enabled": True})  # off by default
    d = _card(
        run=_run(MAIN, cfg=expanding),
        extra_runs={
            "vector": _run(VECTOR, mode="vector"),
            "keyword": _run(better_keyword, mode="keyword"),
            "ablate_expansion": _run(no_expansion),
        },
    ).dimension("architecture")
    # hybrid (0.6) loses to keyword (0.8) and expansion costs 0.15: both on, both hurt
    assert str(d.evidence["hybrid"]).startswith("on, hurts")
    assert str(d.evidence["expansion"]).startswith("on, hurts")
    assert d.score == pytest.approx(100 * 15 / (25 + 15 + 15), abs=0.05)  # only filters earn
    suggested = [d.next_experiment["overrides"], *(a["overrides"] for a in d.alternatives)]
    assert {"search.mode": "keyword"} in suggested and {"expansion.enabled": False} in suggested


def test_architecture_gives_points_to_a_capability_that_is_off_because_it_hurts():
    cfg = EngineConfig().with_overrides({"expansion.enabled": False})
    with_expansion = _rows([1, 1, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.25, 0.25], [1, 1, 1, 0, 0])
    d = _card(
        run=_run(MAIN, cfg=cfg),
        extra_runs={
            "vector": _run(VECTOR, mode="vector"),
            "ablate_expansion": _run(with_expansion),
        },
    ).dimension("architecture")
    assert str(d.evidence["expansion"]).startswith("off, would hurt")
    assert d.score == 100.0


def test_a_reranker_the_log_shows_hurting_earns_its_points_off_and_is_not_suggested_again():
    history = [
        {
            "number": 4,
            "changes": {"rerank.provider": ["none", "onnx-cross-encoder"]},
            "decision": "rolled back",
            "baseline": {"hash": EngineConfig().hash, "tune": {"mrr": 0.6}},
            "result": {"tune": {"mrr": 0.3}},
        }
    ]
    card = _card(history=history)
    arch = card.dimension("architecture")
    verdict = str(arch.evidence["rerank"])
    assert verdict.startswith("off, would hurt") and "#4" in verdict
    rr = card.dimension("rerank")
    assert rr.next_experiment is None or rr.next_experiment["overrides"] != {
        "rerank.provider": "onnx-cross-encoder"
    }
    tried = [a for a in rr.alternatives if a.get("tried")]
    assert tried and tried[0]["tried"]["number"] == 4 and tried[0]["tried"]["delta_mrr"] == -0.3
    for d in card.weaknesses:  # never proposed again as a weakness's next experiment
        assert not d.next_experiment or d.next_experiment["overrides"] != {
            "rerank.provider": "onnx-cross-encoder"
        }


def test_a_suggestion_whose_requirement_is_missing_is_disabled_with_the_reason():
    from workbench.tune.suggestions import requirement_missing

    cfg, kb = EngineConfig(), _kb()
    why = requirement_missing({"index.use_summaries": True}, cfg, kb, llm_configured=False)
    assert why is not None and "LLM" in str(why)
    assert requirement_missing({"index.use_summaries": True}, cfg, kb, llm_configured=True) is None
    assert requirement_missing({"fusion.k": 30}, cfg, kb, llm_configured=False) is None
    why = requirement_missing(
        {"rerank.provider": "sentence-transformers"}, cfg, kb, llm_configured=False
    )
    assert why is not None and "rerank.model" in str(why)


def test_to_dict_and_markdown():
    card = _card()
    data = card.to_dict()
    assert [d["key"] for d in data["dimensions"]] == list(WEIGHTS)
    assert data["grade"] == "C" and len(data["weaknesses"]) == 3
    md = card.to_markdown()
    assert "grade C" in md and "wikirag experiment try --set" in md
    assert "Evidence and formulas" in md


def test_weaknesses_get_distinct_experiments():
    card = _card()
    weak = {d.key: d for d in card.weaknesses}
    # recall@5 and hit@5 share their candidate fixes; the second gets the next one
    assert weak["recall5"].next_experiment["overrides"] == {"fusion.multiplier": 5}
    assert weak["hit5"].next_experiment["overrides"] == {"fusion.k": 20.0}
    # the dimension list keeps each dimension's own first choice
    assert card.dimension("hit5").next_experiment["overrides"] == {"fusion.multiplier": 5}
