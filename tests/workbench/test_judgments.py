"""Graded judgments: stored beside the golden set, combined per pair, fed to every measure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import pytrec_eval

from engine.config import EngineConfig
from engine.pipeline import Ranked
from workbench.eval import golden
from workbench.eval import judgments as J
from workbench.eval import metrics as M
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord
from workbench.eval.unjudged import rating_queue, rescored

YAML = """\
# my comment survives
name: t
queries:
  - id: q1
    query: how do I chunk documents
    relevant: [a]   # the main chapter
  - id: q2
    query: what is hybrid search
    relevant: [x]
"""


def _set(tmp_path: Path) -> Path:
    p = tmp_path / "t.yaml"
    p.write_text(YAML, encoding="utf-8")
    return p


def test_listed_chapters_are_grade_two_and_relevant(tmp_path: Path) -> None:
    gs = golden.load(_set(tmp_path))
    assert gs.get("q1").qrels == {"a": 2}  # type: ignore[union-attr]
    assert gs.get("q1").relevant_grade == 2  # type: ignore[union-attr]


def test_judgments_file_sits_beside_the_set_and_leaves_the_yaml_alone(tmp_path: Path) -> None:
    p = _set(tmp_path)
    before = p.read_bytes()
    J.append(J.path_for(p), [J.judgment("q1", "b", 3, "ana"), J.judgment("q1", "c", "l", "ana")])
    assert J.path_for(p) == tmp_path / "t.judgments.jsonl"
    assert p.read_bytes() == before
    gs = golden.load(p)
    # "later" is not a grade: c stays unjudged.
    assert gs.get("q1").qrels == {"a": 2, "b": 3}  # type: ignore[union-attr]


def test_a_raters_latest_judgment_wins_and_raters_combine_by_low_median() -> None:
    js = [
        J.Judgment("q", "n", 3, "ana"),
        J.Judgment("q", "n", 1, "ana"),  # ana changed her mind
        J.Judgment("q", "n", 2, "bo"),
        J.Judgment("q", "m", 3, "ana"),
        J.Judgment("q", "m", 0, "bo"),
        J.Judgment("q", "m", 2, "cy"),
    ]
    assert J.consensus(js) == {"q": {"n": 1, "m": 2}}


def test_a_judgment_overrides_the_golden_list(tmp_path: Path) -> None:
    p = _set(tmp_path)
    J.append(J.path_for(p), [J.judgment("q1", "a", 0, "ana")])
    assert golden.load(p).get("q1").qrels == {"a": 0}  # type: ignore[union-attr]


def test_content_hash_changes_with_a_judgment_only(tmp_path: Path) -> None:
    p = _set(tmp_path)
    plain = golden.load(p)
    assert plain.content_hash == golden.parse(YAML).content_hash
    J.append(J.path_for(p), [J.judgment("q2", "y", 1, "ana")])
    assert golden.load(p).content_hash != plain.content_hash


def test_saving_the_set_keeps_comments_and_judgments(tmp_path: Path) -> None:
    p = _set(tmp_path)
    J.append(J.path_for(p), [J.judgment("q2", "y", 1, "ana")])
    gs = golden.load(p)
    edited = golden.with_item(
        gs, golden.item_from_dict({"id": "q2", "query": "hybrid search?", "relevant": ["x"]})
    )
    golden.save(edited)
    text = p.read_text(encoding="utf-8")
    assert "# my comment survives" in text and "# the main chapter" in text
    assert golden.load(p).get("q2").qrels == {"x": 2, "y": 1}  # type: ignore[union-attr]


def test_a_malformed_judgment_line_is_named(tmp_path: Path) -> None:
    f = tmp_path / "t.judgments.jsonl"
    f.write_text('{"query": "q1", "node": "a", "grade": 7, "rater": "x"}\n', encoding="utf-8")
    with pytest.raises(J.JudgmentsError, match=r"t.judgments.jsonl:1: .*grade must be 0"):
        J.read(f)


@pytest.mark.parametrize("bad", ["5", "yes", ""])
def test_a_bad_grade_is_refused(bad: str) -> None:
    with pytest.raises(J.JudgmentsError, match="grade must be"):
        J.parse_grade(bad)


def test_a_judgment_needs_a_rater() -> None:
    with pytest.raises(J.JudgmentsError, match="--rater"):
        J.judgment("q1", "a", 2, " ")


def test_graded_ndcg_and_binary_measures_agree_with_pytrec_eval(tmp_path: Path) -> None:
    p = _set(tmp_path)
    J.append(
        J.path_for(p),
        [
            J.judgment("q1", "b", 3, "ana"),
            J.judgment("q1", "c", 1, "ana"),
            J.judgment("q1", "d", 0, "ana"),
        ],
    )
    item = golden.load(p).get("q1")
    assert item is not None
    ranked = ["c", "d", "a", "e", "b"]
    ours = M.evaluate_query(
        ranked, item.qrels, ["ndcg@10", "ndcg@3", "recall@3", "mrr", "map"],
        relevance_level=item.relevant_grade,
    )  # fmt: skip
    run = {"q1": {d: float(len(ranked) - i) for i, d in enumerate(ranked)}}
    graded = pytrec_eval.RelevanceEvaluator({"q1": item.qrels}, {"ndcg_cut_10", "ndcg_cut_3"})
    binary = pytrec_eval.RelevanceEvaluator(
        {"q1": item.qrels}, {"recall_3", "recip_rank", "map"}, relevance_level=2
    )
    ref = graded.evaluate(run)["q1"] | binary.evaluate(run)["q1"]
    assert ours["ndcg@10"] == pytest.approx(ref["ndcg_cut_10"])
    assert ours["ndcg@3"] == pytest.approx(ref["ndcg_cut_3"])
    assert ours["recall@3"] == pytest.approx(ref["recall_3"]) == pytest.approx(0.5)
    # c (grade 1, "related") is not relevant to binary measures: the first relevant is a at 3.
    assert ours["mrr"] == pytest.approx(ref["recip_rank"]) == pytest.approx(1 / 3)
    assert ours["map"] == pytest.approx(ref["map"])


def _run(gs: golden.GoldenSet, tops: dict[str, list[str]], label: str = "r") -> RunRecord:
    results = [
        QueryRecord(
            gs.get(qid),  # type: ignore[arg-type]
            "hybrid",
            [Ranked(n, 1.0 / (i + 1), None, None, i + 1, None) for i, n in enumerate(ids)],
            {"ndcg@10": 0.0, "mrr": 0.0},
            1.0,
            [],
            None,
        )
        for qid, ids in tops.items()
    ]
    return RunRecord.of(
        EngineConfig(),
        results,
        run_id=label,
        created="",
        dataset=DatasetRef(gs.name, "", gs.content_hash),
        split="all",
        modes=("hybrid",),
        rerank=False,
    )


def test_unjudged_share_counts_top_slots_without_a_grade(tmp_path: Path) -> None:
    gs = golden.load(_set(tmp_path))
    run = _run(gs, {"q1": ["a", "b", "c"], "q2": ["x", "y"]})
    assert run.unjudged_share("hybrid", gs) == pytest.approx(3 / 5)
    assert run.unjudged_share("hybrid", gs, k=1) == 0.0


def test_rating_changes_the_unjudged_share_and_the_rescored_ndcg(tmp_path: Path) -> None:
    p = _set(tmp_path)
    gs = golden.load(p)
    run = rescored(_run(gs, {"q1": ["b", "a"], "q2": ["x"]}), gs)
    before = run.means("hybrid")["ndcg@10"]
    J.append(J.path_for(p), [J.judgment("q1", "b", 3, "ana")])
    gs2 = golden.load(p)
    after = rescored(run, gs2)
    assert after.unjudged_share("hybrid", gs2) == 0.0
    # q1: b (3) at 1, a (2) at 2 is the ideal order now: 1.0; before, a alone at rank 2.
    assert after.per_query("hybrid")["q1"]["ndcg@10"] == pytest.approx(1.0)
    assert before == pytest.approx((1 / M.math.log2(3) + 1.0) / 2)
    assert after.dataset.hash == gs2.content_hash != run.dataset.hash


def test_the_queue_pools_configs_dedupes_and_puts_later_last(tmp_path: Path) -> None:
    gs = golden.load(_set(tmp_path))
    one = _run(gs, {"q1": ["b", "a", "c"], "q2": ["z"]}, "one")
    two = _run(gs, {"q1": ["c", "b"], "q2": ["x", "w"]}, "two")
    js = [J.Judgment("q1", "b", J.LATER, "ana"), J.Judgment("q2", "w", J.UNSURE, "ana")]
    q = rating_queue([("one", one), ("two", two)], gs, k=3, judgments=js, rater="ana")
    assert [(e.item_id, e.node_id, e.best_rank) for e in q] == [
        ("q1", "c", 1), ("q2", "z", 1), ("q1", "b", 1),
    ]  # fmt: skip
    assert q[0].systems == ("one", "two")
    everyone = rating_queue([("one", one), ("two", two)], gs, k=3)
    assert len(everyone) == 4


def test_the_judgments_file_is_one_json_object_a_line(tmp_path: Path) -> None:
    f = tmp_path / "x.judgments.jsonl"
    J.append(f, [J.judgment("q1", "章节#一", 2, "李")])
    J.append(f, [J.judgment("q1", "b", "?", "bo")])
    lines = f.read_text(encoding="utf-8").splitlines()
    assert [json.loads(s)["grade"] for s in lines] == [2, "unsure"]
    assert "章节#一" in lines[0]  # readable, not \\u escapes


def test_compare_shows_unjudged_shares_and_flags_mixed_golden_versions(tmp_path: Path) -> None:
    from dataclasses import replace

    from workbench.tune.compare import compare_runs

    gs = golden.load(_set(tmp_path))
    a = _run(gs, {"q1": ["a", "b"], "q2": ["x"]}, "a")
    b = _run(gs, {"q1": ["a"], "q2": ["x"]}, "b")
    c = compare_runs([("a", a), ("b", b)])
    assert c.unjudged == (pytest.approx(1 / 3), 0.0) and not c.versions_differ
    md = c.to_markdown()
    assert "Unjudged in top 10: `a` 33.3%, `b` 0.0% (above 5%" in md
    assert "different golden-set versions" not in md
    relabelled = replace(b, dataset=replace(b.dataset, hash="0123456789ab"))
    c2 = compare_runs([("a", a), ("b", relabelled)])
    assert c2.versions_differ and c2.to_dict()["golden_versions_differ"]
    assert "WARNING: the runs scored different golden-set versions" in c2.to_markdown()
