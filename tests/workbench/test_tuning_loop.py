"""The tuning loop's core: runs named by config label, compare saving and re-using runs,
the per-query matrix, side-by-side lists, one story per miss, readable verdicts and the
already-tried check."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import pytest

from engine.config import EngineConfig
from tests.workbench.test_analysis import RUN_A, RUN_B, _miss, _q, _record
from tests.workbench.test_compare import A, B, _run
from workbench.eval import analysis
from workbench.eval.causes import query_miss
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.run_labels import with_overrides_label, workspace_label
from workbench.eval.saved_runs import list_saved_runs, load_run
from workbench.tune.acceptance import decide_scores
from workbench.tune.compare import compare_configs
from workbench.tune.query_matrix import build_matrix
from workbench.tune.side_by_side import side_by_side
from workbench.tune.verdict import from_decision, p_text
from workbench.workspace import Workspace


@pytest.fixture()
def ws(tmp_path: Path) -> Workspace:
    exp = tmp_path / "experiments" / "wiki"
    return Workspace(tmp_path, tmp_path / "idx", tmp_path / "gs.yaml", exp, None)


class _Engine:
    index_fingerprint = "fp1"


class FakeEvaluator:
    calls: ClassVar[list[float]] = []

    def __init__(self, cfg: EngineConfig) -> None:
        self.engine = _Engine()

    def run(self, gs, cfg, *, modes, split, kb_name=""):
        FakeEvaluator.calls.append(cfg.fusion.k)
        run = _run(A if cfg.fusion.k == 60 else B, cfg=cfg)
        run.run_id = f"20261202-000000-{cfg.hash[:6]}"
        run.dataset = replace(run.dataset, hash=gs.content_hash)
        run.index_fingerprint = self.engine.index_fingerprint
        return run


GS = GoldenSet("gs", tuple(GoldenItem(f"q{n}", f"query {n}", ("rel",)) for n in range(4)))


def _configs():
    base = EngineConfig()
    return [("baseline", base), ("baseline+fusion.k=30", base.with_overrides({"fusion.k": 30}))]


def test_labels_name_the_config_and_its_overrides():
    assert workspace_label(None) == "defaults"
    assert workspace_label(Path("experiments/wiki/baseline.yaml")) == "baseline"
    assert workspace_label(Path("tuned.yaml"), {"fusion.k": 30.0}) == "tuned+fusion.k=30"
    assert with_overrides_label("v7", {"fusion.bm25_weight": 0.4}) == "v7+fusion.bm25_weight=0.4"


def test_compare_saves_each_configs_run_under_its_label_and_reuses_it(ws):
    FakeEvaluator.calls = []
    first = compare_configs(ws, _configs(), GS, evaluator_for=FakeEvaluator)
    assert FakeEvaluator.calls == [60.0, 30.0]
    assert first.reused == (False, False)
    saved = {r.label: r.run_id for r in list_saved_runs(ws.runs_dir)}
    assert saved == dict(zip(first.labels, first.run_ids, strict=True))
    again = compare_configs(ws, _configs(), GS, evaluator_for=FakeEvaluator)
    assert FakeEvaluator.calls == [60.0, 30.0]  # nothing evaluated the second time
    assert again.reused == (True, True) and again.run_ids == first.run_ids
    assert again.to_dict()["configs"][1]["reused"] is True
    # a saved run opens by its label as well as by its id
    assert load_run(ws.runs_dir, "baseline+fusion.k=30").run_id == first.run_ids[1]


def test_compare_reruns_when_the_golden_set_changed(ws):
    FakeEvaluator.calls = []
    compare_configs(ws, _configs(), GS, evaluator_for=FakeEvaluator)
    other = GoldenSet("gs", (*GS.items[:3], GoldenItem("q3", "a reworded query", ("rel",))))
    compare_configs(ws, _configs(), other, evaluator_for=FakeEvaluator)
    assert FakeEvaluator.calls == [60.0, 30.0, 60.0, 30.0]


def test_compare_json_has_a_matrix_row_for_every_query_with_each_configs_values(ws):
    c = compare_configs(ws, _configs(), GS, evaluator_for=FakeEvaluator, reuse=False)
    m = json.loads(c.to_json())["matrix"]
    assert [r["qid"] for r in m["rows"]] == ["q0", "q1", "q2", "q3"]
    row = m["rows"][1]
    assert row["values"]["baseline"]["mrr"] == pytest.approx(0.1)
    assert row["values"]["baseline+fusion.k=30"]["mrr"] == pytest.approx(0.5)
    assert row["outcome"]["baseline+fusion.k=30"] == "won"
    assert m["counts"]["baseline+fusion.k=30"] == {"won": 1, "lost": 1, "tied": 2}


def test_matrix_filters_by_outcome_and_slice_and_sorts_by_change():
    m = build_matrix([RUN_A, RUN_B], ["a", "b"])
    assert [r.qid for r in m.select("mrr")] == ["q1", "q3", "q2", "q4"]  # |Δ| .5, .5, 0, 0
    assert [r.qid for r in m.select("mrr", outcome="won")] == ["q1"]
    assert [r.qid for r in m.select("mrr", outcome="lost")] == ["q3"]
    assert [r.qid for r in m.select("mrr", outcome="changed")] == ["q1", "q3"]
    assert [r.qid for r in m.select("mrr", slice_by="category", slice_value="agents")] == ["q2"]
    with pytest.raises(ValueError, match="outcome must be"):
        m.select("mrr", outcome="better")


def test_side_by_side_marks_gold_moves_and_the_stage_that_lost_each_gold_chapter():
    s = side_by_side([RUN_A, RUN_B], ["a", "b"], "q3")
    ref, cand = s.columns
    assert [(e.node_id, e.gold, e.move) for e in cand.entries] == [
        ("y", False, 1),
        ("g3a", True, -1),
    ]
    lost = next(g for g in ref.gold if g.node_id == "g3b")
    assert lost.rank is None and lost.cause is not None
    assert lost.cause.text() == "dropped by fusion"


def test_the_failures_table_the_card_and_the_side_by_side_tell_one_story():
    # q9 misses two chapters lost at different stages: every view says the same
    rec = _record(
        "C",
        "cccccc",
        [
            _q(
                "q9",
                ["x"],
                ["g1", "g2"],
                rec5=0.0,
                mrr=0.0,
                cause="lost_in_both",
                attribution=[_miss("g1", "lost_in_both"), _miss("g2", "lost_in_bm25")],
            )
        ],
    )
    table = analysis.failures(rec, "hybrid")[0].to_dict()["cause_text"]
    card = analysis.story(rec, "hybrid", "q9")
    assert card.miss is not None and card.miss.text() == table
    assert "lost in BM25 and vector candidates" in table and "lost in BM25 candidates" in table
    sbs = side_by_side([rec, rec], ["a", "b"], "q9")
    for col in sbs.columns:
        per_gold = {g.node_id: g.cause.text() for g in col.gold if g.cause}
        assert per_gold == {g.node_id: g.fate.text() for g in card.gold if g.fate}
    # no raw None anywhere a person reads
    assert "None" not in table
    assert all("None" not in g.fate.detail.render() for g in card.gold if g.fate)


def test_a_query_without_a_miss_has_no_cause():
    q = RUN_A.for_mode("hybrid")[0]
    assert query_miss(q) is None


def test_the_verdict_reads_as_a_sentence_with_ci_p_and_query_counts():
    a = {f"q{i}": {"mrr": 0.5, "recall@5": 0.5, "hit@5": 1.0, "ndcg@10": 0.5} for i in range(30)}
    b = {q: {**v, "mrr": v["mrr"] + (0.2 if i < 12 else 0.0)} for i, (q, v) in enumerate(a.items())}
    v = from_decision(decide_scores(a, b))
    text = v.text()
    assert text.startswith("MRR +0.080 (95% CI +")
    assert ", 12 queries better, 0 worse: accepted" in text
    assert v.message.key.startswith("{measure} {delta}")  # the translation key
    worse = {
        q: {**v, "mrr": v["mrr"] - (0.01 if i < 2 else 0.0)} for i, (q, v) in enumerate(a.items())
    }
    rolled = from_decision(decide_scores(a, worse))
    assert rolled.outcome == "rolled back" and rolled.reasons
    assert "needs >" not in rolled.text()  # the rule's threshold syntax stays out of the prose


def test_p_values_are_written_as_people_write_them():
    assert [p_text(p) for p in (0.0004, 0.0123, 0.32, 1.0)] == ["< 0.001", "0.012", "0.32", "1.00"]


def test_reports_and_compare_markdown_name_runs_by_label(ws):
    from workbench.export.markdown_report import render_markdown
    from workbench.export.report import build_report

    run = _run(A)
    run.label = "baseline+fusion.k=30"
    md = render_markdown(build_report(None, run))
    assert "Run **baseline+fusion.k=30 · " in md
    c = compare_configs(ws, _configs(), GS, evaluator_for=FakeEvaluator, reuse=False)
    text = c.to_markdown()
    assert f"- `baseline+fusion.k=30`: run `{c.run_ids[1]}`" in text
