"""The tuning loop's next steps: an already-tried change says so (and the CLI stops without
--again), each scorecard weakness offers something runnable, the trajectory shows rolled-back
candidates, the Overview's latest-run fact, and every core message has a Chinese entry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.config import EngineConfig
from workbench.cli import main
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.tune.experiment_history import trajectory
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.loop_figures import tick_step, trajectory_figure
from workbench.tune.next_steps import detectable_change, next_steps, sweep_values
from workbench.tune.search_space import SEARCH_SPACE
from workbench.tune.tried import earlier_try
from workbench.ui.i18n import catalog

REPO = Path(__file__).resolve().parents[2]
BASE = EngineConfig()
CAND = BASE.with_overrides({"fusion.k": 30})
COMP = {
    "measure": "mrr",
    "mean_a": 0.60,
    "mean_b": 0.58,
    "delta": -0.02,
    "ci_low": -0.05,
    "ci_high": 0.01,
    "p_value": 0.21,
    "wins": 3,
    "losses": 6,
    "ties": 23,
}


def _record(number: int, decision: str, dataset_hash: str = "h1", mrr: float = 0.58) -> dict:
    return {
        "number": number,
        "date": "2026-12-02 05:00",
        "title": "fusion.k=30",
        "decision": decision,
        "changes": {"fusion.k": [60.0, 30.0]},
        "baseline": {"hash": BASE.hash, "tune": {"recall@5": 0.5, "mrr": 0.60, "hit@5": 0.7}},
        "result": {"hash": CAND.hash, "tune": {"recall@5": 0.49, "mrr": mrr, "hit@5": 0.69}},
        "dataset_hash": dataset_hash,
        "details": {
            "rule": {"primary": "mrr", "alpha": 0.05},
            "comparisons": {"mrr": COMP},
            "criteria": [
                {
                    "name": "mrr improves (CI low)",
                    "value": -0.05,
                    "threshold": "> 0 or p < 0.05",
                    "passed": False,
                    "detail": "",
                }
            ],
        },
    }


def _store(tmp_path: Path, *records: dict) -> ExperimentStore:
    store = ExperimentStore(tmp_path / "experiments" / "kb")
    store.folder.mkdir(parents=True, exist_ok=True)
    store.records.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return store


def test_a_change_tried_against_the_same_baseline_and_golden_set_is_found(tmp_path):
    store = _store(tmp_path, _record(4, "rolled back"))
    before = earlier_try(store, {"fusion.k": 30}, "h1")
    assert before is not None and before.number == 4
    text = before.message.render()
    assert text.startswith("already tried as experiment 4 (2026-12-02 05:00)")
    assert "MRR -0.020 (95% CI -0.050 to +0.010, p 0.21), 3 queries better, 6 worse" in text
    assert earlier_try(store, {"fusion.k": 30}, "another golden set") is None
    assert earlier_try(store, {"fusion.k": 20}, "h1") is None


def test_cli_try_shows_the_earlier_result_and_stops_without_again(tmp_path, monkeypatch, capsys):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# A\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    gs = GoldenSet("kb", (GoldenItem("q1", "what is a", ("a",)),))
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(
        "queries:\n  - id: q1\n    query: what is a\n    relevant: [a]\n", encoding="utf-8"
    )
    from workbench.eval import golden

    h = golden.load(tmp_path / "datasets" / "kb.yaml").content_hash
    _store(tmp_path, _record(2, "rolled back", dataset_hash=h))
    assert gs.items  # the set above is what the file holds
    rc = main(["experiment", "try", "--kb", "kb", "--set", "fusion.k=30"])
    out = capsys.readouterr().out
    assert rc == 1
    assert "already tried as experiment 2" in out and "--again" in out


def test_an_untried_suggestion_is_an_experiment_and_its_key_a_sweep_with_the_current_value():
    steps = next_steps({"overrides": {"fusion.k": 20.0}, "why": "smaller k"}, (), BASE, None, [])
    assert [s.kind for s in steps] == ["experiment", "sweep"]
    assert steps[0].command == "wikirag experiment try --set fusion.k=20"
    assert steps[1].command.startswith("wikirag sweep --grid fusion.k=")
    assert 60.0 in steps[1].args["values"] and 20.0 in steps[1].args["values"]


def test_when_everything_was_tried_the_steps_are_the_optimizer_and_a_bigger_golden_set():
    tried = {"overrides": {"fusion.k": 20.0}, "why": "", "tried": {"number": 1}}
    items = tuple(
        GoldenItem(f"q{i}", f"query {i}", ("a",), split="tune", category="c" if i % 4 else "d")
        for i in range(40)
    )
    history = [_record(n, "rolled back") for n in range(1, 4)]
    steps = next_steps(None, (tried,), BASE, GoldenSet("gs", items), history)
    assert [s.kind for s in steps] == ["sweep", "optimize", "grow_golden_set"]
    grow = steps[-1]
    floor, sd = detectable_change(GoldenSet("gs", items), history)
    assert grow.args["mde"] == pytest.approx(round(floor, 4))
    # the CI width (0.06 over 32 queries) implies sd ~0.087; at 40 queries MDE ~0.039
    assert sd == pytest.approx(0.06 * 32**0.5 / (2 * 1.959964), rel=1e-3)
    assert grow.args["category"] == "d" and grow.args["add"] == 120
    assert "cannot detect changes below 0.0" in grow.message.render()


def test_sweep_values_keep_the_current_value_inside_the_range():
    spec = next(s for s in SEARCH_SPACE if s.key == "lexical.b")
    values = sweep_values(spec, 0.75)
    assert 0.75 in values and min(values) >= 0.0 and max(values) <= 1.0


def test_the_trajectory_plots_rolled_back_candidates_as_hollow_markers_on_an_integer_axis(
    tmp_path,
):
    store = _store(tmp_path, _record(1, "rolled back", mrr=0.52), _record(2, "rolled back"))
    points = trajectory(store)
    assert [p["candidate"]["mrr"] for p in points[1:]] == [0.52, 0.58]
    assert [p["mrr"] for p in points] == [0.60, 0.60, 0.60]  # the baseline stayed
    fig = trajectory_figure(points)
    hollow = [t for t in fig.data if t.marker.symbol == "circle-open"]
    assert hollow and list(next(t for t in hollow if "mrr" in t.name).y) == [0.52, 0.58]
    assert fig.layout.xaxis.tickformat == "d" and fig.layout.xaxis.dtick == 1
    assert fig.layout.xaxis.tickangle == 0 and fig.layout.legend.orientation == "h"


@pytest.mark.parametrize(
    ("last", "step"), [(1, 1), (10, 1), (11, 2), (20, 2), (26, 5), (51, 10), (101, 20), (999, 100)]
)
def test_the_trajectory_puts_at_most_ten_level_ticks_on_its_experiment_axis(last, step):
    assert tick_step(last) == step and last / step <= 10


CORE_MESSAGE_FILES = (
    "workbench/eval/causes.py",
    "workbench/tune/verdict.py",
    "workbench/tune/tried.py",
    "workbench/tune/next_steps.py",
    "workbench/tune/run_status.py",
    "workbench/tune/study_figures.py",
)
_MESSAGE = re.compile(r'Message\(\s*((?:"[^"]*"\s*)+)', re.S)


def _keys(path: Path) -> set[str]:
    keys = set()
    for m in _MESSAGE.finditer(path.read_text(encoding="utf-8")):
        parts = re.findall(r'"([^"]*)"', m.group(1))
        keys.add("".join(parts))
    return keys


def test_every_core_message_has_a_chinese_entry():
    zh = catalog("zh")
    keys = set().union(*(_keys(REPO / f) for f in CORE_MESSAGE_FILES))
    keys.discard("")
    keys |= {"{measure} (baseline)", "{measure} (rolled back)"}
    assert len(keys) > 20
    missing = sorted(k for k in keys if "{measure} {delta}" not in k and k not in zh)
    assert missing == []
    # the verdict's two templates (query / queries) are spliced; both are in the catalog
    assert sum(1 for k in zh if k.startswith("{measure} {delta} ({level}% CI")) == 2


def test_the_overview_learns_when_the_latest_run_is_not_the_baselines(tmp_path):
    from tests.workbench.test_compare import A, _run
    from workbench.eval.run_record import save_run
    from workbench.tune.run_status import latest_run_status
    from workbench.workspace import Workspace

    ws = Workspace(tmp_path, tmp_path / "idx", tmp_path / "gs.yaml", tmp_path / "exp", None)
    assert latest_run_status(ws) is None
    run = _run(A, cfg=CAND)
    run.run_id, run.label = "20261202-010000-" + CAND.hash[:6], "defaults+fusion.k=30"
    save_run(run, ws.runs_dir)
    status = latest_run_status(ws)
    assert status is not None and not status.is_baseline
    assert "defaults+fusion.k=30" in status.message.render()
    base = _run(A)
    base.run_id = "20261202-020000-" + BASE.hash[:6]
    save_run(base, ws.runs_dir)
    assert latest_run_status(ws).is_baseline and latest_run_status(ws).message is None


def test_parameter_importance_from_few_trials_carries_a_caveat_with_its_threshold():
    from workbench.tune.study_figures import IMPORTANCE_TRIALS_PER_PARAM, importance_caveat

    few = importance_caveat(12, 3)
    assert few is not None
    assert "12 trials for 3 parameters" in few.render()
    assert f"about {3 * IMPORTANCE_TRIALS_PER_PARAM}" in few.render()
    assert importance_caveat(3 * IMPORTANCE_TRIALS_PER_PARAM, 3) is None
