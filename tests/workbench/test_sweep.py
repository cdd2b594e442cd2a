import csv
import io
import json

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord
from workbench.export.formats import rows_csv
from workbench.tune.sweep import (
    best_index,
    expand_grid,
    format_sweep,
    parse_grid_arg,
    sweep,
    sweep_figures,
)

# The first release's fusion (weighted RRF 1:1): these tests are about RRF, not the default.
RRF11 = EngineConfig().with_overrides(
    {"fusion.method": "rrf", "fusion.vector_weight": 1.0, "fusion.bm25_weight": 1.0}
)

GS = GoldenSet("gs", ())


def test_parse_grid_arg_reads_yaml_values():
    assert parse_grid_arg("fusion.k=10,30,60.5") == ("fusion.k", [10, 30, 60.5])
    assert parse_grid_arg("expansion.enabled=true,false") == ("expansion.enabled", [True, False])
    assert parse_grid_arg("search.mode=hybrid, keyword") == ("search.mode", ["hybrid", "keyword"])
    with pytest.raises(ConfigError, match="KEY=v1,v2"):
        parse_grid_arg("fusion.k")


def test_expand_grid_order_and_checks():
    base = RRF11
    pts = expand_grid(base, {"fusion.k": [10, 60], "fusion.bm25_weight": [1, 2, 3]})
    assert pts[:4] == [
        {"fusion.k": 10, "fusion.bm25_weight": 1},
        {"fusion.k": 10, "fusion.bm25_weight": 2},
        {"fusion.k": 10, "fusion.bm25_weight": 3},
        {"fusion.k": 60, "fusion.bm25_weight": 1},
    ]
    assert len(pts) == 6
    with pytest.raises(ConfigError, match="1 or 2 keys"):
        expand_grid(base, {"fusion.k": [1], "fusion.multiplier": [2], "lexical.b": [0.5]})
    with pytest.raises(ConfigError, match="unknown config key"):
        expand_grid(base, {"fusion.kk": [1]})
    with pytest.raises(ConfigError, match=">= 0"):
        expand_grid(base, {"fusion.k": [10, -1]})
    with pytest.raises(ConfigError, match="no values"):
        expand_grid(base, {"fusion.k": []})


def _run(cfg, split, recall, mrr, lat):
    item = GoldenItem("q1", "q", ("a",), split=split)
    m = {"recall@5": recall, "mrr": mrr, "hit@5": 1.0, "ndcg@10": recall}
    res = [QueryRecord(item, cfg.search.mode, [], m, lat, [], None)]
    return RunRecord.of(
        cfg,
        res,
        run_id="r",
        created="t",
        dataset=DatasetRef("gs", "", "h"),
        split=split,
        modes=(cfg.search.mode,),
        rerank=False,
    )


class FakeEvaluator:
    """Recall peaks at fusion.k=30; bm25_weight 2 adds 0.1; holdout is 0.1 lower."""

    def __init__(self, cfg, calls=None):
        self.cfg = cfg
        self.calls = calls if calls is not None else []

    def run(self, gs, cfg, *, modes, split):
        self.calls.append((cfg.fusion.k, cfg.fusion.bm25_weight, split))
        k, w = cfg.fusion.k, cfg.fusion.bm25_weight
        recall = 0.5 + (0.2 if k == 30 else 0.0) + (0.1 if w == 2 else 0.0)
        recall -= 0.1 if split == "holdout" else 0.0
        return _run(cfg, split, recall, recall / 2, lat=k + 10 * w)


def test_sweep_one_key_best_point_and_holdout():
    calls = []
    res = sweep(
        None,
        RRF11,
        {"fusion.k": [10, 30, 60]},
        GS,
        evaluator_for=lambda cfg: FakeEvaluator(cfg, calls),
    )
    assert [p.values for p in res.points] == [{"fusion.k": k} for k in (10, 30, 60)]
    assert res.best.values == {"fusion.k": 30}
    assert res.best.tune["recall@5"] == pytest.approx(0.7)
    assert res.best.holdout["recall@5"] == pytest.approx(0.6)
    assert res.best.latency_p95 == pytest.approx(40.0)
    assert [c[2] for c in calls] == ["tune", "holdout"] * 3
    text = format_sweep(res)
    assert "best on tune: fusion.k=30" in text
    assert "wikirag experiment try --set fusion.k=30" in text
    assert len(sweep_figures(res)) == 2


def test_sweep_two_keys_matrix_csv_json():
    res = sweep(
        None,
        RRF11.with_overrides({"fusion.k": 10}),  # the current values are grid points here
        {"fusion.k": [10, 30], "fusion.bm25_weight": [1.0, 2.0]},
        GS,
        evaluator_for=FakeEvaluator,
    )
    assert res.matrix("recall@5") == [
        [pytest.approx(0.5), pytest.approx(0.6)],
        [pytest.approx(0.7), pytest.approx(0.8)],
    ]
    assert res.best.values == {"fusion.k": 30, "fusion.bm25_weight": 2.0}
    rows = list(csv.DictReader(io.StringIO(rows_csv(res.rows()))))
    assert len(rows) == 4
    assert {"fusion.k", "tune_recall@5", "holdout_recall@5", "latency_p95"} <= set(rows[0])
    data = json.loads(res.to_json())
    assert data["best"]["fusion.k"] == 30 and len(data["rows"]) == 4
    assert "tune recall@5: rows fusion.k, columns fusion.bm25_weight" in format_sweep(res)
    figs = sweep_figures(res)
    assert figs[0].data[0].type == "heatmap"


def test_a_sweep_always_includes_the_current_value_and_plots_each_measure_on_its_own_axis():
    res = sweep(None, RRF11, {"fusion.k": [10, 30]}, GS, evaluator_for=FakeEvaluator)
    assert [p.values["fusion.k"] for p in res.points] == [10, 30, 60.0]  # 60: the current k
    assert res.current_index == 2
    line = sweep_figures(res)[0]
    axes = {t.yaxis for t in line.data}
    assert len(axes) == len(line.data) == 3  # one y axis per measure


def test_best_index_tie_breaks():
    # equal recall: higher MRR wins; then lower p95; then grid order
    base = RRF11

    def point(recall, mrr, lat):
        from workbench.tune.sweep import _point

        run = _run(base, "tune", recall, mrr, lat)
        return _point({}, base, "hybrid", run, run)

    assert best_index([point(0.5, 0.3, 5), point(0.5, 0.4, 50)]) == 1
    assert best_index([point(0.5, 0.4, 50), point(0.5, 0.4, 5)]) == 1
    assert best_index([point(0.5, 0.4, 5), point(0.5, 0.4, 5)]) == 0
    assert best_index([point(0.4, 0.9, 1), point(0.5, 0.1, 99)]) == 1


def test_pareto_front():
    res = sweep(None, RRF11, {"fusion.k": [10, 30, 60]}, GS, evaluator_for=FakeEvaluator)
    # k=10: 0.5 @ 20 ms; k=30: 0.7 @ 40 ms; k=60: 0.5 @ 70 ms (dominated)
    assert res.pareto() == [0, 1]


class HoldoutFlipEvaluator(FakeEvaluator):
    """k=30 wins on tune but loses on holdout; every latency within 0.02 ms."""

    def run(self, gs, cfg, *, modes, split):
        k = cfg.fusion.k
        good = (k == 30) == (split == "tune")
        recall = 0.7 if good else 0.5
        return _run(cfg, split, recall, recall / 2, lat=63.48 + 0.01 * (k == 30))


def test_sweep_marks_the_current_value_and_warns_when_the_best_loses_on_holdout():
    res = sweep(None, RRF11, {"fusion.k": [10, 30, 60]}, GS, evaluator_for=HoldoutFlipEvaluator)
    assert res.current == {"fusion.k": 60.0}
    assert res.current_index == 2
    assert res.best.values == {"fusion.k": 30}
    warning = res.holdout_warning()
    assert warning is not None and "loses on holdout" in warning and "current value" in warning
    text = format_sweep(res)
    assert "=60" in text and "warning: the best tune point loses on holdout" in text
    assert json.loads(res.to_json())["current_index"] == 2


def test_sweep_says_latency_differences_under_the_noise_floor_are_noise():
    res = sweep(None, RRF11, {"fusion.k": [10, 30, 60]}, GS, evaluator_for=HoldoutFlipEvaluator)
    assert res.latency_within_noise()
    assert "within the noise floor" in format_sweep(res)
    scatter = sweep_figures(res)[1]
    lo, hi = scatter.layout.xaxis.range
    assert hi - lo >= 2 * res.latency_noise_ms() - 1e-9  # the axis does not magnify 0.01 ms
    # real differences are not called noise
    spread = sweep(None, RRF11, {"fusion.k": [10, 60]}, GS, evaluator_for=FakeEvaluator)
    assert not spread.latency_within_noise()


def test_sweep_without_a_holdout_loss_gives_no_warning():
    res = sweep(None, RRF11, {"fusion.k": [10, 30, 60]}, GS, evaluator_for=FakeEvaluator)
    assert res.holdout_warning() is None
