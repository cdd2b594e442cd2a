"""The Tune page: reference vs a typed change, the matrix, a query side by side, an experiment
run from the page with its verdict in place, and the deep link that reopens it all."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.ui.conftest import APP
from workbench.ui import state


def _tune(at: AppTest) -> AppTest:
    at.switch_page("views/tune.py").run()
    assert not at.exception
    return at


def _text(at: AppTest) -> str:
    return " ".join(
        m.value for m in [*at.markdown, *at.caption, *at.warning, *at.error, *at.success]
    )


def test_tune_compares_baseline_with_a_typed_change_and_runs_it_as_an_experiment(ui_copy):
    at = _tune(AppTest.from_file(str(APP), default_timeout=90))
    at.text_input(key=state.item_key(state.TUNE_EDIT, 0)).input("fusion.bm25_weight=3").run()
    at.button(key=state.TUNE_RUN).click().run()
    assert not at.exception, at.exception
    res = state_result(at)
    assert res.labels == ("baseline", "baseline+fusion.bm25_weight=3")
    # the matrix names its columns by config and has a row per golden query
    frames = [d.value for d in at.dataframe]
    assert any("baseline+fusion.bm25_weight=3" in f.columns for f in frames)
    assert any(len(f) == 5 and "id" in f.columns for f in frames)
    assert at.query_params["cand"] in (
        "baseline+fusion.bm25_weight=3",
        ["baseline+fusion.bm25_weight=3"],
    )
    at.button(key=state.item_key(state.TUNE_EXPERIMENT, 1)).click().run()
    assert not at.exception, at.exception
    verdicts = [m.value for m in [*at.success, *at.error, *at.info]]
    assert any("Experiment 1" in v or "No effect" in v for v in verdicts), verdicts


def state_result(at: AppTest):
    shown = at.session_state[state.TUNE_RESULT]
    assert shown is not None
    return shown[0]


def test_a_tune_link_reopens_the_comparison_and_the_query(ui_copy):
    at = AppTest.from_file(str(APP), default_timeout=90)
    at.query_params["ref"] = "baseline"
    at.query_params["cand"] = "baseline+fusion.k=5"
    at.query_params["q"] = "q002"
    _tune(at)
    res = state_result(at)
    assert res.labels[1] == "baseline+fusion.k=5"
    assert any(m.value.startswith("#### q002") for m in at.markdown)


def test_a_bad_change_says_what_is_wrong_in_one_line(ui_copy):
    at = _tune(AppTest.from_file(str(APP), default_timeout=90))
    at.text_input(key=state.item_key(state.TUNE_EDIT, 0)).input("fusion.nope=3").run()
    at.button(key=state.TUNE_RUN).click().run()
    assert any("unknown config key" in e.value for e in at.error), [e.value for e in at.error]
    assert state.TUNE_RESULT not in at.session_state


def test_a_scorecard_next_experiment_opens_the_tune_page_with_the_change_filled_in(ui_copy):
    at = AppTest.from_file(str(APP), default_timeout=120)
    at.run()
    at.switch_page("views/scorecard.py").run()
    at.button(key=state.SCORECARD_RECOMPUTE).click().run()
    assert not at.exception
    links = [e.proto for e in at.get("page_link")]
    to_tune = [p for p in links if p.page.endswith("tune") and "cand=baseline%2B" in p.query_string]
    assert to_tune, [(p.page, p.query_string) for p in links]
