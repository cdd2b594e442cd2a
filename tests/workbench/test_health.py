"""Golden-set health: the MDE means what it says (checked by simulation), and the figures."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import numpy as np
import pytest

from engine.config import EngineConfig
from engine.pipeline import Ranked
from workbench.cli import main
from workbench.eval import golden
from workbench.eval.health import golden_health, mde, spread_from_comparison
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord
from workbench.eval.stats import paired_bootstrap_ci, randomization_test

REPO = Path(__file__).resolve().parents[2]


def test_mde_is_the_normal_approximation_worked_by_hand() -> None:
    # (z_0.975 + z_0.8) * sd / sqrt(n) = (1.959964 + 0.841621) * 0.2 / 8
    assert mde(0.2, 64) == pytest.approx(0.0700396, abs=1e-6)
    with pytest.raises(ValueError, match="n must be"):
        mde(0.2, 0)


def _detection_rate(noise, n: int, effect: float, trials: int, rng) -> float:
    found = 0
    for t in range(trials):
        diffs = noise(rng, n) + effect
        found += randomization_test(diffs, n_samples=2000, seed=t) < 0.05
    return found / trials


@pytest.mark.parametrize(
    ("name", "noise", "sd"),
    [
        ("normal", lambda rng, n: rng.normal(0.0, 0.25, n), 0.25),
        # Like MRR deltas: most queries unchanged, a few moving a lot.
        (
            "mostly ties",
            lambda rng, n: np.where(rng.random(n) < 0.3, rng.normal(0.0, 0.4, n), 0.0),
            (0.3 * 0.4**2) ** 0.5,
        ),
    ],
)
def test_an_effect_the_size_of_the_mde_is_found_at_about_the_stated_power(name, noise, sd) -> None:
    n = 64
    effect = mde(sd, n)
    rate = _detection_rate(noise, n, effect, 300, np.random.default_rng(7))
    assert rate == pytest.approx(0.8, abs=0.07), name
    # And half the effect is mostly missed: the MDE is not a loose bound.
    assert _detection_rate(noise, n, effect / 2, 150, np.random.default_rng(8)) < 0.45


def test_the_spread_is_recovered_from_a_logged_bootstrap_ci() -> None:
    diffs = np.random.default_rng(3).normal(0.01, 0.2, 64)
    lo, hi = paired_bootstrap_ci(diffs)
    c = {"ci_low": lo, "ci_high": hi, "wins": 30, "losses": 30, "ties": 4, "delta": 0.01}
    assert spread_from_comparison(c) == pytest.approx(statistics.stdev(diffs), rel=0.1)
    assert spread_from_comparison({"wins": 1}) is None


def _run(gs: golden.GoldenSet, cfg: EngineConfig, firsts: dict[str, str], run_id: str) -> RunRecord:
    results = []
    for it in gs.answerable():
        top = [firsts[it.id], "other"]
        mrr = 1.0 if top[0] in it.relevant else 0.5 if "other" in it.relevant else 0.0
        results.append(
            QueryRecord(
                it,
                "hybrid",
                [Ranked(n, 1.0, None, None, 1, None) for n in top],
                {"mrr": mrr},
                1.0,
                [],
                None,
            )
        )
    return RunRecord.of(
        cfg,
        results,
        run_id=run_id,
        created="",
        dataset=DatasetRef(gs.name, "", gs.content_hash),
        split="all",
        modes=("hybrid",),
        rerank=False,
    )


GOLD = """name: h
queries:
  - {id: a, query: one, relevant: [x], category: c1}
  - {id: b, query: two, relevant: [y], category: c1}
  - {id: c, query: three, relevant: [z, other], category: c2}
  - {id: u, query: four, unanswerable: true}
"""


def test_health_reports_sizes_saturation_unjudged_and_mde_from_run_pairs() -> None:
    gs = golden.parse(GOLD)
    base, other = EngineConfig(), EngineConfig().with_overrides({"fusion.k": 30})
    r1 = _run(gs, base, {"a": "x", "b": "y", "c": "q"}, "r1")  # mrr 1, 1, 0.5
    r2 = _run(gs, other, {"a": "x", "b": "n", "c": "z"}, "r2")  # mrr 1, 0, 1
    h = golden_health(gs, runs=[r2, r1], baseline_hash=base.hash)
    assert h.queries["all"] == 3 and h.queries["unanswerable"] == 1
    assert h.slices["category"] == {"c1": 2, "c2": 1}
    assert h.judged_depth == {"mean": 4 / 3, "min": 1, "max": 2}
    assert h.saturated == ["a"] and h.configs_tried == 2
    # The baseline's run r1: a (x, other), b (y, other), c (q, other): 3 of 6 unjudged.
    assert h.unjudged_run == "r1" and h.unjudged_at_10 == pytest.approx(0.5)
    sd = statistics.stdev([0.0, -1.0, 0.5])
    assert h.spread_sd == pytest.approx(sd)
    assert h.mde["all"] == pytest.approx(mde(sd, 3))


def test_health_without_history_says_there_is_no_mde() -> None:
    h = golden_health(golden.parse(GOLD))
    assert h.mde["all"] is None and h.unjudged_at_10 is None
    assert any("no spread" in n for n in h.notes)


def test_golden_health_json_on_the_bundled_wiki(capsys, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    assert main(["golden", "health", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    gs = golden.load(REPO / "datasets" / "wiki.yaml")
    assert got["queries"]["tune"] == len(gs.answerable("tune"))
    assert got["queries"]["holdout"] == len(gs.answerable("holdout"))
    assert 0.0 <= got["unjudged_at_10"] <= 1.0 and 0.0 <= got["saturation"] <= 1.0
    assert got["mde"]["tune"] == pytest.approx(mde(got["spread_sd"], got["queries"]["tune"]))
    assert got["mde"]["holdout"] > got["mde"]["tune"]  # fewer queries, larger MDE


def test_coverage_lists_documents_no_question_labels(tmp_path: Path) -> None:
    from engine.tree import parse_kb
    from tests.engine.engine_kit import write_kb
    from workbench.eval.health import coverage

    kb = parse_kb(write_kb(tmp_path / "kb"))
    gs = golden.parse(
        "name: c\nqueries:\n  - {id: a, query: x, relevant: ['rag/chunking#切块策略/按标题切块']}\n"
    )
    cov = coverage(gs, kb)
    assert cov["documents"] == len(kb.documents) and cov["covered"] == 1
    assert "rag/chunking" not in cov["uncovered"]
    assert sorted(cov["uncovered"]) == sorted(
        d.doc_id for d in kb.documents if d.doc_id != "rag/chunking"
    )
