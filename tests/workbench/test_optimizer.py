from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.engine.engine_kit import HASH_CFG
from tests.workbench import synthetic_kb
from workbench.eval import golden
from workbench.eval.engines import evaluator, forget_engines
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.optimizer import optimize, run_study
from workbench.tune.study import Study, load_studies
from workbench.tune.study_figures import study_figures
from workbench.workspace import resolve

VECTOR_BASE = HASH_CFG.with_overrides({"search.mode": "vector"})


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    synthetic_kb.write(tmp_path)
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    VECTOR_BASE.save(tmp_path / "experiments" / "kb" / "baseline.yaml")
    forget_engines()
    yield resolve("kb")
    forget_engines()


def _ev(ws):
    return lambda cfg: evaluator(ws, cfg)


def test_seeded_optimize_finds_the_known_better_config_and_submits_one_experiment(ws) -> None:
    out = optimize(ws, _ev(ws), trials=25, seed=3, k_folds=3, yes=True)
    study = out.study
    assert len(study.trials) == 25 and study.trials[0].changes == 0  # trial 0: the baseline
    pick = study.trial(study.pick)
    assert pick is not None and pick.params["search.mode"] != "vector"
    assert pick.value > study.baseline_score + 0.1  # BM25 finds what vectors miss
    records = ExperimentStore(ws.experiments).load_records()
    assert len(records) == 1 and out.experiment is not None
    rec = records[0]
    assert rec["number"] == out.experiment.number == study.experiment
    assert rec["changes"]["search.mode"][1] == pick.params["search.mode"]
    attached = rec["optimize"]
    assert attached["picked_trial"] == study.pick and attached["trials"] == 25
    sidecar = ws.experiments / attached["trials_file"]
    assert sidecar == out.sidecar and sidecar.is_file()
    saved = json.loads(sidecar.read_text(encoding="utf-8"))
    assert len(saved["trials"]) == 25 and saved["experiment"] == rec["number"]
    assert [s.study_id for s in load_studies(ws.experiments)] == [study.study_id]


def test_same_seed_same_trials(ws) -> None:
    base = ExperimentStore(ws.experiments).baseline_config()
    items = golden.load(ws.dataset).answerable("tune")
    a = run_study(evaluator(ws, base), base, items, trials=12, seed=5, k_folds=3)
    b = run_study(evaluator(ws, base), base, items, trials=12, seed=5, k_folds=3)
    assert [t.params for t in a.trials] == [t.params for t in b.trials]
    assert [t.folds for t in a.trials] == [t.folds for t in b.trials]
    c = run_study(evaluator(ws, base), base, items, trials=12, seed=6, k_folds=3)
    assert [t.params for t in c.trials] != [t.params for t in a.trials]


def test_timeout_stops_the_search(ws) -> None:
    base = ExperimentStore(ws.experiments).baseline_config()
    items = golden.load(ws.dataset).answerable("tune")
    ev = evaluator(ws, base)
    run_study(ev, base, items, trials=2, seed=0, k_folds=3)  # caches warm, as in real use
    t0 = time.perf_counter()
    study = run_study(ev, base, items, trials=100_000, timeout_s=1.5, seed=0, k_folds=3)
    elapsed = time.perf_counter() - t0
    assert study.stopped_by == "timeout" and 1 < len(study.trials) < 100_000
    slowest = max(t.seconds for t in study.trials)
    assert study.budget["search_seconds"] <= 1.5 + slowest + 0.5
    assert elapsed < 30


def test_dry_run_writes_nothing(ws) -> None:
    out = optimize(ws, _ev(ws), trials=6, seed=1, k_folds=3, yes=True, dry_run=True)
    assert out.sidecar is None
    assert ExperimentStore(ws.experiments).load_records() == []
    assert not (ws.experiments / "studies").exists()


def test_figures_build_from_the_stored_study(ws) -> None:
    out = optimize(ws, _ev(ws), trials=20, seed=2, k_folds=3, yes=True, dry_run=True)
    stored = Study.from_dict(json.loads(json.dumps(out.study.to_dict())))
    figs = study_figures(stored)
    assert set(figs) == {"history", "importance"}
    history = figs["history"]
    ys = [y for trace in history.data for y in (trace.y or ()) if y is not None]
    assert max(ys) == pytest.approx(max(t.value for t in stored.trials if t.value is not None))
    assert figs["importance"].data  # at least one parameter rated


def test_cli_optimize_search_and_catalog_flags(ws, capsys) -> None:
    from workbench.cli import main

    assert main(["optimize", "--kb", "kb", "--budget", "3"]) == 2
    assert "--catalog" in capsys.readouterr().err
    assert main(["optimize", "--kb", "kb", "--catalog", "--trials", "3"]) == 2
    assert "--trials" in capsys.readouterr().err
    assert main(["optimize", "--kb", "kb", "--trials", "0"]) == 2
    assert "--trials" in capsys.readouterr().err
    rc = main(["optimize", "--kb", "kb", "--trials", "8", "--folds", "3", "--dry-run", "--yes"])
    assert rc == 0
    out = capsys.readouterr().out
    assert "8 trials" in out and "3-fold CV" in out
    # A dry run decides but writes nothing, and its decision line says so.
    assert "decision: would be" in out and "(dry run)" in out and "new baseline" not in out


def test_html_report_carries_the_study_figures(ws) -> None:
    from workbench.export.html_report import render_html
    from workbench.export.markdown_report import render_markdown
    from workbench.export.report import build_report

    out = optimize(ws, _ev(ws), trials=12, seed=4, k_folds=3, yes=True)
    base = ExperimentStore(ws.experiments).baseline_config()
    run = evaluator(ws, base).run(golden.load(ws.dataset), base, modes=[base.search.mode])
    report = build_report(ws, run)
    assert report.study is not None and report.study["study_id"] == out.study.study_id
    html = render_html(report, include_plotlyjs=False)
    assert "Optimization history" in html  # importance: test_figures_build_from_the_stored_study
    assert f"Latest search `{out.study.study_id}`: 12 trials" in render_markdown(report)


def test_optimize_refuses_while_another_writer_holds_the_lock(ws) -> None:
    import multiprocessing as mp

    from workbench.tune.experiment_store import ExperimentBusyError

    store = ExperimentStore(ws.experiments)
    ready, release = mp.Event(), mp.Event()
    holder = mp.get_context("fork").Process(
        target=_hold_lock, args=(str(ws.experiments), ready, release)
    )
    holder.start()
    try:
        assert ready.wait(30)
        with pytest.raises(ExperimentBusyError):
            optimize(ws, _ev(ws), trials=3, seed=0, k_folds=3, yes=True)
        assert store.load_records() == []
    finally:
        release.set()
        holder.join(30)


def _hold_lock(folder: str, ready, release) -> None:
    with ExperimentStore(folder).lock("test holder"):
        ready.set()
        release.wait(30)


def _never_called(cfg):
    raise AssertionError("the search ran although the set is too small for it")


def test_optimize_on_a_set_below_its_guard_says_so_before_searching(ws, capsys) -> None:
    from workbench.cli import main
    from workbench.tune.size_guard import SearchTooLargeError

    # 18 tune queries for the whole space: fewer than 10 a parameter.
    with pytest.raises(SearchTooLargeError, match=r"18 tune queries for \d+ searched parameters"):
        optimize(ws, _never_called, trials=3, k_folds=3)
    assert main(["optimize", "--kb", "kb", "--trials", "3"]) == 2
    err = capsys.readouterr().err
    assert "golden set too small for this search" in err and "--narrow to search 1" in err
    assert err.count("\n") == 1 and not ExperimentStore(ws.experiments).load_records()


def test_narrow_searches_only_what_the_set_carries_and_says_so(ws) -> None:
    out = optimize(ws, _ev(ws), trials=4, seed=0, k_folds=3, narrow=True, dry_run=True)
    assert [s["key"] for s in out.study.space] == ["search.mode"]  # 18 queries carry 1
    assert "--narrow: searching search.mode only" in out.study.notes[0]


def test_params_names_the_keys_to_search_and_refuses_unknown_ones(ws) -> None:
    from engine.errors import EngineError

    out = optimize(ws, _ev(ws), trials=3, k_folds=3, params=["fusion.k"], dry_run=True)
    assert [s["key"] for s in out.study.space] == ["fusion.k"]
    with pytest.raises(EngineError, match="--params: nope not in the search space"):
        optimize(ws, _never_called, trials=3, k_folds=3, params=["nope"])


def _study(folds: dict[int, list[float]], changes: dict[int, int]) -> Study:
    from workbench.tune.study import TrialRow, pick_trial

    rows = [TrialRow(n, {}, sum(f) / len(f), f, changes[n], 0.0) for n, f in sorted(folds.items())]
    best, pick = pick_trial(rows, 3)
    return Study(
        "s", "", "kb", "kb", "h", "b", "mrr", 3, 0, 18, [6, 6, 6], [], {}, rows,
        folds[0], best, pick, {}, 0.0, "trials",
    )  # fmt: skip


def test_the_decision_uses_outer_folds_and_reports_the_optimism() -> None:
    from workbench.tune.optimizer import confirmation

    # Trial 1 beats the baseline on tune by more than one SE (0.700 vs 0.500), but a pick
    # made without fold 0 or 1 is the baseline, and without fold 2 it is trial 1, which
    # loses on fold 2: gains 0, 0, -0.1.
    study = _study({0: [0.5, 0.5, 0.5], 1: [0.9, 0.8, 0.4]}, {0: 0, 1: 1})
    assert study.pick == 1
    assert study.confirmed_gains() == pytest.approx([0.0, 0.0, -0.1])
    o = study.optimism()
    assert o["tune_gain"] == pytest.approx(0.2)
    assert o["confirmed_gain"] == pytest.approx(-0.1 / 3)
    assert o["optimism"] == pytest.approx(0.2 + 0.1 / 3)
    crit = confirmation(study)
    assert not crit.passed and crit.value == pytest.approx(-0.1 / 3)
    # A gain every fold confirms goes through.
    good = _study({0: [0.5, 0.5, 0.5], 1: [0.8, 0.85, 0.9]}, {0: 0, 1: 1})
    assert good.confirmed_gains() == pytest.approx([0.3, 0.35, 0.4])
    assert confirmation(good).passed


def test_every_optimizer_experiment_records_its_optimism(ws) -> None:
    out = optimize(ws, _ev(ws), trials=25, seed=3, k_folds=3, yes=True, dry_run=True)
    assert out.experiment is not None
    summary = out.experiment.extra["optimize"]
    assert summary["optimism"] == pytest.approx(summary["tune_gain"] - summary["confirmed_gain"])
    assert "optimism" in out.experiment.notes
    names = [c.name for c in out.experiment.decision.criteria]
    assert "nested-CV gain on unseen folds" in names


def test_a_set_without_cross_lingual_questions_does_not_search_the_cross_lingual_key(ws) -> None:
    from types import SimpleNamespace

    from workbench.tune.optimizer import without_inert
    from workbench.tune.search_space import SEARCH_SPACE, available

    # The synthetic KB and its questions are English: the key cannot move a query there.
    out = optimize(ws, _ev(ws), trials=3, seed=0, k_folds=3, yes=True, dry_run=True)
    assert "fusion.cross_lingual_bm25" not in [s["key"] for s in out.study.space]
    assert any("no tune question is cross-lingual" in n for n in out.study.notes)
    # The Experiments page reads the notes in the reader's language (the UI's catalog).
    from workbench.ui import i18n

    zh = i18n.catalog("zh")
    texts = out.study.note_texts(lambda key: zh.get(key, key))
    assert any("调参集中没有对本索引而言跨语言的问题" in n for n in texts)
    assert "fusion.cross_lingual_bm25" in out.study.to_dict()["notes"][0]  # saved in English
    # One cross-lingual tune question keeps it in the space.
    gs = golden.load(ws.dataset)
    first = gs.answerable("tune")[0].query
    engine = SimpleNamespace(query_script_share=lambda q: 0.2 if q == first else 0.9)
    specs = available(SEARCH_SPACE)
    kept, note = without_inert(specs, gs, SimpleNamespace(engine=engine))  # type: ignore[arg-type]
    assert kept == specs and note is None


def test_the_size_guards_note_reads_in_chinese_and_keeps_its_english() -> None:
    from workbench.tune import size_guard
    from workbench.ui import i18n

    zh = i18n.catalog("zh")
    guard = size_guard.SizeGuard(queries=18, params=12, mde=0.031, effects_seen=0.009)
    note = size_guard.check(guard, yes=True)
    assert note is not None
    assert note.render() == (
        "golden set too small for this search: 18 tune queries for 12 searched parameters "
        "(fewer than 10 a parameter: the search would fit these queries; they carry about 1); "
        "the set's minimum detectable MRR effect (0.031) is above the typical effect its "
        "experiments show (0.009); searching anyway (--yes)"
    )
    assert guard.message() + "; searching anyway (--yes)" == note.render()
    chinese = note.render(lambda key: zh.get(key, key))
    assert chinese.startswith("黄金集太小，撑不起这次搜索：18 条调参查询对应 12 个搜索参数")
    assert chinese.endswith("仍然搜索（--yes）")
    assert size_guard.check(size_guard.SizeGuard(200, 5, 0.01, 0.02), yes=False) is None
