"""Experiments end to end on a tiny KB (hash embedder): log, baseline, side indexes."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.indexer import build_index
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb
from tests.workbench.test_evaluate import GOLDEN
from workbench.eval.engines import evaluator, index_location, open_engine
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.experiments import run_experiment
from workbench.workspace import resolve


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    kb = write_kb(tmp_path / "kb")
    build_index(parse_kb(kb), HASH_CFG, str(tmp_path / ".wikirag" / "kb"))
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(GOLDEN, encoding="utf-8")
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    HASH_CFG.save(tmp_path / "experiments" / "kb" / "baseline.yaml")
    return resolve("kb")


def test_try_logs_and_keeps_baseline_on_rollback(ws) -> None:
    res = run_experiment(ws, lambda c: evaluator(ws, c), {"fusion.vector_weight": 0.0})
    store = ExperimentStore(ws.experiments)
    assert [r["number"] for r in store.load_records()] == [res.number] == [1]
    log = store.log_md.read_text(encoding="utf-8")
    assert "### Experiment 1:" in log and "**Holdout**" in log
    if not res.decision.accepted:
        assert store.baseline_config() == HASH_CFG
    # every criterion is logged with its value and threshold, in Markdown and JSONL
    assert "**Rule**: statistical" in log and "holdout mrr not significantly worse" in log
    details = store.load_records()[0]["details"]
    assert details["rule"]["primary"] == "mrr"
    assert all({"name", "value", "threshold", "passed"} <= set(c) for c in details["criteria"])


def test_try_with_strict_rule_and_kb_rule_file(ws) -> None:
    from workbench.tune.rule import STRICT

    res = run_experiment(ws, lambda c: evaluator(ws, c), {"fusion.k": 5.0}, rule=STRICT)
    assert "regressed queries" in [c.name for c in res.decision.criteria]
    (ws.experiments / "rule.yaml").write_text("preset: strict\nmin_primary_delta: 0.5\n")
    res = run_experiment(ws, lambda c: evaluator(ws, c), {"fusion.k": 7.0}, dry_run=True)
    assert res.decision.rule.min_primary_delta == 0.5 and "rule.yaml" in res.decision.rule.name


def test_embedding_changes_get_a_side_index(ws) -> None:
    cfg = HASH_CFG.with_overrides({"index.content_chars": 60})
    assert index_location(ws, HASH_CFG) == str(ws.index)
    side = index_location(ws, cfg)
    assert side.startswith(str(ws.index) + "@")
    assert index_location(ws, HASH_CFG.with_overrides({"fusion.k": 5.0})) == str(ws.index)
    eng = open_engine(ws, cfg, side_index=True)
    assert Path(side).is_dir()
    assert eng.stats()["index"]["rows"] == len(eng.kb.nodes)
    res = run_experiment(ws, lambda c: evaluator(ws, c), {"index.content_chars": 60})
    assert res.cand_hash == cfg.hash


@pytest.mark.parametrize("argv", [["--tiers", "9"], ["--tiers", "x"], ["--budget", "0"]])
def test_optimize_rejects_bad_arguments(ws, argv, capsys) -> None:
    from workbench.cli import main

    assert main(["optimize", "--kb", "kb", *argv]) == 2
    assert "--" in capsys.readouterr().err


def test_a_change_that_leaves_every_ranking_identical_is_no_effect_and_not_logged(ws) -> None:
    # the rerank weight only matters when rerank is on; here it is off
    res = run_experiment(ws, lambda c: evaluator(ws, c), {"rerank.weight": 0.5})
    assert res.no_effect and res.verdict == "no effect" and res.number == 0
    store = ExperimentStore(ws.experiments)
    assert store.load_records() == []
    assert not store.log_md.exists() or "rerank.weight" not in store.log_md.read_text("utf-8")
    assert store.baseline_config() == HASH_CFG


def test_experiment_names_the_queries_it_improved_and_regressed(ws) -> None:
    res = run_experiment(ws, lambda c: evaluator(ws, c), {"search.mode": "vector"})
    moves = res.extra["queries"]
    assert set(moves) == {"improved", "regressed"}
    for kind, sign in (("improved", 1), ("regressed", -1)):
        for row in moves[kind]:
            assert {"id", "query", "delta"} <= set(row) and row["delta"] * sign > 0
    rec = ExperimentStore(ws.experiments).load_records()[-1]
    assert rec["queries"] == moves


def test_stemming_is_index_affecting_and_gets_a_side_index(ws) -> None:
    from engine.config import affects_index
    from workbench.eval.evaluate import retrieval_key

    # The workspace's index is built with the defaults, which stem: turning it off is the change.
    plain = HASH_CFG.with_overrides({"lexical.stem": False})
    assert HASH_CFG.lexical.stem is True and affects_index("lexical.stem")
    assert not affects_index("lexical.k1") and not affects_index("lexical.title_weight")
    assert plain.index_key != HASH_CFG.index_key
    assert retrieval_key(plain, "x") != retrieval_key(HASH_CFG, "x")
    # Scoring-only lexical keys keep the main index.
    assert index_location(ws, HASH_CFG.with_overrides({"lexical.k1": 1.2})) == str(ws.index)
    side = index_location(ws, plain)
    assert side.startswith(str(ws.index) + "@")
    eng = open_engine(ws, plain, side_index=True)
    assert eng._shared.current().snapshot.manifest.tokenizer == "jieba-search"
    res = run_experiment(ws, lambda c: evaluator(ws, c), {"lexical.stem": False})
    assert res.cand_hash == plain.hash


def test_log_rows_are_newest_first_and_the_trajectory_knows_the_golden_set(ws) -> None:
    from workbench.tune.experiment_history import log_rows, trajectory

    ev = lambda c: evaluator(ws, c)  # noqa: E731
    run_experiment(ws, ev, {"search.mode": "vector"})
    run_experiment(ws, ev, {"search.mode": "keyword"})
    store = ExperimentStore(ws.experiments)
    rows = log_rows(store)
    assert [r["number"] for r in rows] == [2, 1]
    assert {"decision", "tune Δ", "holdout Δ", "measure"} <= set(rows[0])
    assert isinstance(rows[0]["tune Δ"], float)
    points = trajectory(store)
    assert all(p.get("dataset_hash") for p in points[1:])  # which golden set decided each
