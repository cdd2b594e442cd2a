import json

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError, EngineError
from engine.pipeline import Ranked
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord
from workbench.tune.compare import (
    compare_configs,
    compare_runs,
    comparison_figures,
    parse_config_spec,
)
from workbench.workspace import Workspace


def _ranked(ids):
    return [Ranked(n, 1.0 / (i + 1), None, None, i + 1, None) for i, n in enumerate(ids)]


def _run(rows, cfg=None, lat=10.0):
    """rows: per query (recall@5, mrr, ranking); query n's relevant chapter is 'rel'."""
    results = []
    for n, (r5, mrr, ranking) in enumerate(rows):
        item = GoldenItem(f"q{n}", f"query {n}", ("rel",))
        m = {"recall@5": r5, "mrr": mrr, "ndcg@10": r5, "hit@5": float(r5 > 0)}
        results.append(QueryRecord(item, "hybrid", _ranked(ranking), m, lat, [], None))
    return RunRecord.of(
        cfg or EngineConfig(),
        results,
        run_id="r",
        created="t",
        dataset=DatasetRef("gs", "", "h"),
        split="all",
        modes=("hybrid",),
        rerank=False,
    )


A = [
    (1.0, 1.0, ["rel", "x"]),
    (0.0, 0.1, ["x"] * 9 + ["rel"]),
    (1.0, 0.5, ["x", "rel"]),
    (0.0, 0.0, ["x"]),
]
B = [
    (1.0, 1.0, ["rel", "x"]),  # tie
    (1.0, 0.5, ["x", "rel"]),  # win: recall +1, rank 10 -> 2
    (0.0, 0.125, ["x"] * 7 + ["rel"]),  # loss: recall -1, rank 2 -> 8
    (0.0, 0.0, ["x"]),  # tie
]


def test_first_relevant_rank():
    run = _run(A)
    assert [r.first_relevant_rank for r in run.queries] == [1, 10, 2, None]


def test_compare_runs_deltas_and_wins():
    k30 = EngineConfig().with_overrides({"fusion.k": 30})
    c = compare_runs([("base", _run(A)), ("k30", _run(B, cfg=k30, lat=25.0))])
    assert c.metrics[0]["recall@5"] == pytest.approx(0.5)
    assert c.metrics[1]["recall@5"] == pytest.approx(0.5)
    assert c.delta(1, "recall@5") == pytest.approx(0.0)
    assert c.delta(1, "mrr") == pytest.approx((0.5 + 0.125 - 0.1 - 0.5) / 4)
    assert c.delta(1, "latency_p50") == pytest.approx(15.0)
    assert c.wins_losses_ties(1, "recall@5") == (1, 1, 2)
    assert c.wins_losses_ties(1, "mrr") == (1, 1, 2)
    assert set(c.stats[0]) == {"recall@5", "mrr", "ndcg@10"}
    assert c.diffs[0] == {"fusion.k": (60.0, 30.0)}


def test_changed_queries_ordered_with_ranks():
    c = compare_runs([("a", _run(A)), ("b", _run(B))])
    changed = c.changed[0]
    assert [q.id for q in changed] == ["q1", "q2"]  # |Δrecall| 1 each, then |Δmrr| 0.4 > 0.375
    assert (changed[0].rank_before, changed[0].rank_after) == (10, 2)
    assert (changed[1].rank_before, changed[1].rank_after) == (2, 8)


def test_markdown_and_json():
    c = compare_runs([("a", _run(A)), ("b|x", _run(B))])
    md = c.to_markdown()
    assert "| recall@5 | 0.500 | 0.500 (+0.000) |" in md
    assert "b\\|x" in md  # a pipe in a label cannot break the table
    assert "10 → 2" in md
    data = json.loads(c.to_json())
    assert data["configs"][1]["stats"]["recall@5"]["wins"] == 1
    assert data["configs"][1]["changed_queries"][0]["first_relevant_rank"] == [10, 2]
    assert len(comparison_figures(c)) == 2


def test_compare_needs_two_to_four():
    with pytest.raises(ValueError, match="2 to 4"):
        compare_runs([("a", _run(A))])


def test_compare_configs_with_a_fake_evaluator():
    calls = []

    class FakeEvaluator:
        def __init__(self, cfg):
            self.cfg = cfg

        def run(self, gs, cfg, *, modes, split):
            calls.append((cfg.fusion.k, tuple(modes), split))
            return _run(A if cfg.fusion.k == 60 else B, cfg=cfg)

    base = EngineConfig()
    c = compare_configs(
        None,
        [("base", base), ("k30", base.with_overrides({"fusion.k": 30}))],
        GoldenSet("gs", ()),
        split="tune",
        evaluator_for=FakeEvaluator,
    )
    assert calls == [(60.0, ("hybrid",), "tune"), (30.0, ("hybrid",), "tune")]
    assert c.wins_losses_ties(1) == (1, 1, 2)


@pytest.fixture()
def ws(tmp_path):
    exp = tmp_path / "experiments" / "wiki"
    return Workspace(tmp_path, tmp_path / "idx", tmp_path / "gs.yaml", exp, None)


def test_spec_baseline_defaults_and_overrides(ws):
    assert parse_config_spec("baseline", ws)[1] == EngineConfig()  # no baseline yet
    ws.experiments.mkdir(parents=True)
    EngineConfig().with_overrides({"fusion.k": 20}).save(ws.baseline_path)
    label, cfg = parse_config_spec("baseline+fusion.k=30", ws)
    assert label == "baseline+fusion.k=30" and cfg.fusion.k == 30.0
    assert parse_config_spec("baseline", ws)[1].fusion.k == 20.0
    _, cfg = parse_config_spec("defaults+fusion.k=30,rerank.weight=0.5", ws)
    assert (cfg.fusion.k, cfg.rerank.weight) == (30.0, 0.5)


def test_spec_versions_and_files(ws, tmp_path):
    (ws.experiments / "baselines").mkdir(parents=True)
    EngineConfig().with_overrides({"fusion.k": 10}).save(ws.experiments / "baselines" / "v1.yaml")
    assert parse_config_spec("v1", ws)[1].fusion.k == 10.0
    with pytest.raises(EngineError, match="known versions: v1"):
        parse_config_spec("v7", ws)
    path = tmp_path / "my+cfg.yaml"
    EngineConfig().with_overrides({"fusion.k": 5}).save(path)
    assert parse_config_spec(str(path), ws)[1].fusion.k == 5.0
    assert parse_config_spec(f"{path}+fusion.k=7", ws)[1].fusion.k == 7.0
    with pytest.raises(ConfigError, match="not a file"):
        parse_config_spec("nope.yaml", ws)
    with pytest.raises(ConfigError, match="unknown config key"):
        parse_config_spec("defaults+fusion.kk=3", ws)
