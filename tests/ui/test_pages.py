"""Every page of the Streamlit workbench under AppTest, against a small hash-embedder KB."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from engine.config import EngineConfig
from tests.ui.conftest import APP, FAST
from workbench.ui import state

TIMEOUT = 60


def open_page(page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    if page:
        at.switch_page(f"views/{page}.py").run()
    return at


def texts(at: AppTest) -> str:
    parts = [e.value for e in at.markdown] + [e.value for e in at.title]
    parts += (
        [e.value for e in at.info] + [e.value for e in at.warning] + [e.value for e in at.error]
    )
    parts += [e.value for e in at.success] + [e.value for e in at.caption]
    parts += [e.value for e in at.subheader]
    return "\n".join(str(p) for p in parts)


def test_overview(ui_env):
    at = open_page()
    assert not at.exception
    assert at.title[0].value == "Overview"
    labels = {m.label: m.value for m in at.metric}
    assert labels["Documents"] == "3"
    assert "index fresh" in texts(at)


def test_knowledge_base_tree_chapter_and_search(ui_env):
    at = open_page("knowledge_base")
    assert not at.exception
    assert at.title[0].value == "Knowledge base"
    at.text_input(key=state.KB_FILTER).input("传输方式").run()
    node = next(s for s in at.selectbox if s.key and s.key.startswith(f"{state.KB_NODE}_"))
    assert "传输方式" in node.value
    at.text_input(key=state.KB_QUERY).input("MCP 传输方式")
    at.button[0].click().run()  # the form's submit button sends the typed query
    assert not at.exception
    assert any(m.value.startswith("**1. ") for m in at.markdown), texts(at)
    assert "stage timings:" in texts(at)
    assert any("**MCP**" in m.value or "**传输方式**" in m.value for m in at.markdown)  # marked


def test_knowledge_base_tree_is_grouped_by_document_and_depth(ui_env):
    at = open_page("knowledge_base")
    docs = at.selectbox(key=state.KB_DOC)
    assert len(docs.options) == 3  # the three files of the fixture
    at.selectbox(key=state.KB_DEPTH).select(1).run()
    assert not at.exception
    shallow = len(at.dataframe[0].value)
    at.selectbox(key=state.KB_DEPTH).select(6).run()
    deep = at.dataframe[0].value
    assert len(deep) > shallow
    assert {"file", "category"} <= set(deep.columns)


def test_golden_set_edit_label_and_save(ui_copy):
    at = open_page("golden_set")
    assert not at.exception
    assert at.title[0].value == "Golden set"
    assert not at.error, [e.value for e in at.error]  # the fixture's set is valid
    at.text_input(key=state.GOLDEN_NEW_QUERY).input("MCP 网关做什么？")
    next(b for b in at.button if b.label == "Add query").click().run()
    assert not at.exception
    assert "unsaved changes" in texts(at)
    assert any("q006" in e.value for e in at.error)  # needs 1-4 relevant ids
    assert at.selectbox(key=state.GOLDEN_TARGET).value == "q006"  # the new query is selected
    at.text_input(key=state.GOLDEN_TREE_FILTER).input("MCP 网关").run()
    assert "agents/mcp#" in " ".join(str(c.value) for c in at.caption)  # id + preview shown
    at.button(key=state.GOLDEN_ADD_TREE).click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    at.button(key=state.GOLDEN_SAVE).click().run()
    assert not at.exception
    text = ui_copy["dataset"].read_text(encoding="utf-8")
    assert "MCP 网关做什么？" in text and "q006" in text
    assert "category: agents" in text.split("q006")[1]  # from its first label


def test_golden_set_table_is_clickable_and_becomes_an_editor_on_the_toggle(ui_copy):
    at = open_page("golden_set")
    assert at.toggle(key=state.GOLDEN_TABLE_EDIT).value is False  # a set exists: click mode
    assert [d.key for d in at.dataframe] == [state.GOLDEN_TABLE_PICK] and "Click a row" in texts(at)
    at.toggle(key=state.GOLDEN_TABLE_EDIT).set_value(True).run()
    assert not at.exception
    (editor,) = at.dataframe  # the editor, in place of the clickable table
    assert editor.key.startswith(state.GOLDEN_EDITOR) and "Click a row" not in texts(at)


def test_golden_set_label_can_be_removed(ui_copy):
    at = open_page("golden_set")
    at.selectbox(key=state.GOLDEN_TARGET).select("q002").run()
    at.button(key=state.item_key(state.GOLDEN_REMOVE, 0)).click().run()
    assert not at.exception
    assert any("q002" in e.value for e in at.error)  # no label left: 1-4 ids needed
    assert "unsaved changes" in texts(at)


def test_golden_set_conflict_keeps_edits(ui_copy):
    at = open_page("golden_set")
    at.text_input(key=state.GOLDEN_NEW_QUERY).input("一个新问题")
    next(b for b in at.button if b.label == "Add query").click().run()
    path = ui_copy["dataset"]
    path.write_text(path.read_text(encoding="utf-8") + "# edited elsewhere\n", encoding="utf-8")
    at.button(key=state.GOLDEN_SAVE).click().run()
    assert not at.exception
    assert any("changed outside the workbench" in e.value for e in at.error)
    assert "一个新问题" not in path.read_text(encoding="utf-8")
    at.button(key=state.GOLDEN_OVERWRITE).click().run()
    assert not at.exception
    assert "一个新问题" in path.read_text(encoding="utf-8")


def test_golden_set_drift_and_pooling(ui_copy):
    path = ui_copy["dataset"]
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("/传输方式", "/传输方法"), encoding="utf-8")
    at = open_page("golden_set")
    assert not at.exception
    assert any("unknown node id" in e.value for e in at.error)
    at.button(key=state.GOLDEN_REMAP).click().run()
    assert not at.exception
    assert not any("unknown node id" in e.value for e in at.error)
    at.button(key=state.GOLDEN_POOL_RUN).click().run()
    assert not at.exception


def test_evaluate_runs_and_drills_down(ui_copy):
    at = open_page("evaluate")
    assert not at.exception
    assert at.title[0].value == "Evaluate"
    assert "No run yet" in texts(at)
    at.multiselect(key=state.EVAL_MODES).set_value(["hybrid", "keyword"])
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    assert not at.exception
    # ui.guarded turns a crash (the slice charts once hit a shadowed module) into an error box
    assert not [e.value for e in at.error], "the page crashed after scoring"
    labels = {m.label for m in at.metric}
    assert {"Recall@5", "Recall@10", "Recall@20", "MRR"} <= labels
    bands = {
        m.label: m.delta for m in at.metric if m.label in ("Recall@5", "Recall@10", "Recall@20")
    }
    assert set(bands.values()) <= {"poor", "acceptable", "good", "excellent"}, bands
    assert len(list((ui_copy["experiments"] / "kb" / "runs").glob("*.json"))) == 1
    # the run is listed by its config's label and time, not by its hash-like id
    (shown,) = at.selectbox(key=state.EVAL_RUN).options
    label = at.selectbox(key=state.CONFIG_CHOICE).value
    assert shown.startswith(f"{label} · 20") and "saved " + shown in texts(at), shown
    at.radio(key=state.EVAL_MODE_SHOWN).set_value("keyword").run()
    at.selectbox(key=state.EVAL_DRILL).select("q002").run()
    assert not at.exception
    assert "Failures" in texts(at)
    assert "**q002**" in texts(at) and "Gold chapters" in texts(at)


def test_evaluate_refuses_an_invalid_golden_set_unless_the_box_is_ticked(ui_copy):
    path = ui_copy["dataset"]
    stale = "  - {id: q900, query: 不存在的章节, relevant: ['no/such#chapter']}\n"
    path.write_text(path.read_text(encoding="utf-8") + stale, encoding="utf-8")
    runs = ui_copy["experiments"] / "kb" / "runs"
    at = open_page("evaluate")
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    assert not at.exception
    assert "golden set kb is invalid" in texts(at) and "q900" in texts(at)
    assert not list(runs.glob("*.json"))  # nothing scored, nothing saved
    at.checkbox(key=state.EVAL_ALLOW_INVALID).check()
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    assert not at.exception
    assert "Invalid items skipped: skipped 1 of 6 golden items with errors (q900)" in texts(at)
    [record] = runs.glob("*.json")
    import json

    assert "q900" not in {q["id"] for q in json.loads(record.read_text())["queries"]}


def test_evaluate_opens_on_the_worst_failure_with_its_gold_chapters(ui_copy):
    at = open_page("evaluate")
    at.multiselect(key=state.EVAL_MODES).set_value(["vector"])
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    assert not at.exception
    import json

    run = json.loads(next((ui_copy["experiments"] / "kb" / "runs").glob("*.json")).read_text())
    failing = sorted(
        (q for q in run["queries"] if q["cause"]),
        key=lambda q: (q["metrics"]["recall@5"], q["metrics"]["mrr"], q["id"]),
    )
    assert failing, "the hash embedder should miss some queries in vector mode"
    worst = failing[0]
    assert at.selectbox(key=state.EVAL_DRILL).value == worst["id"]
    assert "lost:" in texts(at)  # the gold chapter card names the stage that lost it
    cause = worst["cause"]
    at.selectbox(key=state.EVAL_FAIL_CAUSE).select(cause).run()
    assert not at.exception
    assert f"{sum(1 for q in failing if q['cause'] == cause)} of" in texts(at)


def test_ui_command_runs_streamlit_on_localhost():
    import argparse

    from workbench.commands.ui_cmd import APP as UI_APP
    from workbench.commands.ui_cmd import streamlit_argv

    args = argparse.Namespace(
        kb="wiki", index=None, config=None, dataset="d.yaml", experiments=None, port=8765
    )
    argv = streamlit_argv(args)
    assert argv[1:5] == ["-m", "streamlit", "run", str(UI_APP)]
    assert argv[argv.index("--server.address") + 1] == "127.0.0.1"
    assert argv[argv.index("--server.port") + 1] == "8765"
    assert argv[argv.index("--") :] == ["--", "--kb", "wiki", "--dataset", "d.yaml"]


def test_compare_two_configs_and_sweep(ui_copy):  # compare saves runs: a private copy
    at = open_page("compare")
    assert not at.exception
    assert at.title[0].value == "Compare & sweep"
    at.selectbox(key=state.item_key(state.COMPARE_BASE, 1)).select(
        "baseline"
    )  # "defaults" uses another embedder
    at.text_input(key=state.item_key(state.COMPARE_EDIT, 1)).input("fusion.bm25_weight=3")
    at.button(key=state.COMPARE_RUN).click().run()
    assert not at.exception
    assert "Paired statistics" in texts(at)
    at.selectbox(key=state.SWEEP_KNOB_1).select("fusion.vector_weight")
    at.text_input(key=state.SWEEP_VALUES_1).input("0.1, 0.3")
    at.selectbox(key=state.SWEEP_KNOB_2).select("fusion.bm25_weight")
    at.text_input(key=state.SWEEP_VALUES_2).input("0.7, 2")
    at.button(key=state.SWEEP_RUN).click().run()
    assert not at.exception
    assert any("Best on tune" in s.value for s in at.success)


def test_experiments_run_decide_restore(ui_copy):
    at = open_page("experiments")
    assert not at.exception
    assert at.title[0].value == "Experiments"
    at.selectbox(key=state.EXPERIMENT_KNOB).select("fusion.bm25_weight").run()
    at.number_input(key=state.item_key(state.EXPERIMENT_VALUE, "fusion.bm25_weight")).set_value(
        3.0
    ).run()
    at.button(key=state.EXPERIMENT_RUN).click().run()
    assert not at.exception
    verdicts = [e.value for e in at.success] + [e.value for e in at.error]
    assert any("Accepted" in v or "Rolled back" in v for v in verdicts), verdicts
    assert any("Rule: **statistical**" in c.value for c in at.caption)  # the rule decided it
    store = ui_copy["experiments"] / "kb"
    assert (store / "optimization_log.md").is_file()
    assert "Experiment 1" in texts(at)  # the log is rendered
    at.button(key=state.EXPERIMENT_RESTORE).click().run()
    assert not at.exception
    assert "restored" in (store / "experiments.jsonl").read_text(encoding="utf-8")


def test_experiments_strict_rule_is_selectable(ui_copy):
    at = open_page("experiments")
    at.selectbox(key=state.EXPERIMENT_RULE).select("strict").run()
    at.selectbox(key=state.EXPERIMENT_KNOB).select("fusion.bm25_weight").run()
    at.number_input(key=state.item_key(state.EXPERIMENT_VALUE, "fusion.bm25_weight")).set_value(
        3.0
    ).run()
    at.button(key=state.EXPERIMENT_RUN).click().run()
    assert not at.exception
    assert any("Rule: **strict**" in c.value for c in at.caption)
    assert "regressed queries" in texts(at)  # strict's absolute criteria are shown


def test_experiments_auto_optimize(ui_copy):
    at = open_page("experiments")
    at.number_input(key=state.OPTIMIZE_BUDGET).set_value(2)
    at.button(key=state.OPTIMIZE_RUN).click().run()
    assert not at.exception
    assert any("2 experiments" in s.value for s in at.success)


def test_experiments_search_shows_study_and_figures(ui_copy):
    at = open_page("experiments")
    at.number_input(key=state.OPTIMIZE_TRIALS).set_value(6)
    at.number_input(key=state.OPTIMIZE_FOLDS).set_value(2)
    # The page's copy of the set is too small for a full search: it says so first.
    assert any("too small for this search" in w.value for w in at.warning)
    assert at.button(key=state.OPTIMIZE_SEARCH).disabled
    at.checkbox(key=state.OPTIMIZE_YES).check().run()
    at.button(key=state.OPTIMIZE_SEARCH).click().run()
    assert not at.exception
    assert any("6 trials, 2-fold CV" in s.value for s in at.success)
    assert len(at.get("plotly_chart")) >= 1  # the optimization history at least
    studies = list((ui_copy["experiments"] / "kb" / "studies").glob("*.json"))
    assert len(studies) == 1


def test_scorecard_grade_dimensions_and_fix(ui_copy):
    at = open_page("scorecard")
    assert not at.exception
    assert at.title[0].value == "Scorecard"
    grade = next(m for m in at.metric if m.label == "Grade").value
    assert grade in {"A", "B", "C+", "C", "D", "F"}
    assert len(at.dataframe[0].value) == 9
    fixes = [b for b in at.button if b.key and b.key.startswith("sc_fix_")]
    nexts = [m.value for m in at.markdown if m.value.startswith("Next experiment")]
    assert len(fixes) == len(nexts)
    cheap = [b for b, text in zip(fixes, nexts, strict=True) if "rerank" not in text]
    if cheap:  # a cross-encoder experiment would load the ONNX model: slow for a unit test
        cheap[0].click().run()
        assert not at.exception
        assert (ui_copy["experiments"] / "kb" / "experiments.jsonl").is_file()
    at.switch_page("views/overview.py").run()
    assert any(m.label == "Grade" for m in at.metric)  # the overview shows it too


def test_chat_extractive_answer_citation_and_bad_answer(ui_copy):
    at = open_page("chat")
    assert not at.exception
    assert at.title[0].value == "Chat"
    assert any("No LLM configured" in i.value for i in at.info)
    at.chat_input(key=state.CHAT_INPUT).set_value("父子块检索的数据结构是什么？").run()
    assert not at.exception
    assert "extractive" in texts(at)
    labels = [e.label for e in at.expander]
    assert any(lb.startswith("\\[1\\]") for lb in labels), labels  # escaped: text, not Markdown
    at.button(key=state.item_key(state.CHAT_BAD, 0)).click().run()
    assert not at.exception
    assert at.multiselect(key=state.CHAT_DRAFT_RELEVANT).value  # cited chapters pre-filled
    at.text_input(key=state.CHAT_DRAFT_QUERY).input("父子块检索的数据结构")
    next(b for b in at.button if b.label == "Save into the golden set").click().run()
    assert not at.exception
    assert "父子块检索的数据结构" in ui_copy["dataset"].read_text(encoding="utf-8")
    assert any("saved to" in s.value for s in at.success)
    at.button(
        key=state.item_key(state.CHAT_OPEN, 0, 1)
    ).click().run()  # citation -> Knowledge base page
    assert not at.exception
    assert at.title[0].value == "Knowledge base"


def test_reports_preview_and_downloads(ui_copy):
    at = open_page("reports")
    assert not at.exception
    assert "No evaluation runs" in texts(at)
    at.switch_page("views/evaluate.py").run()
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    at.switch_page("views/reports.py").run()
    assert not at.exception
    assert at.title[0].value == "Reports"
    labels = {b.label for b in at.get("download_button")}
    assert {"HTML", "Markdown", "CSV", "JSON", "TREC run", "TREC qrels"} <= labels
    assert "Recall@5" in texts(at) or "recall@5" in texts(at)
    at.radio(key=state.REPORT_VIEW).set_value("HTML").run()
    assert not at.exception


def test_every_page_renders_without_exception(ui_env):
    at = open_page()
    for page in ("overview", "knowledge_base", "golden_set", "evaluate", "compare",
                 "experiments", "scorecard", "chat", "reports"):  # fmt: skip
        at.switch_page(f"views/{page}.py").run()
        assert not at.exception, page
        assert at.title, page
        # ui.guarded turns a crash into an error box; a page must not show one either
        assert not any("Technical details" in e.label for e in at.expander), (
            page,
            [e.value for e in at.error],
        )


def test_golden_set_draft_query_from_chapter(ui_copy, monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    at = open_page("golden_set")
    at.text_input(key=state.GOLDEN_TREE_FILTER).input("MCP 网关").run()
    at.button(key=state.GOLDEN_DRAFT_TREE).click().run()
    assert not at.exception
    assert "unsaved changes" in texts(at)
    drafted = [t for t in texts(at).splitlines() if "Drafted q006" in t]
    assert drafted, texts(at)
    at.button(key=state.GOLDEN_SAVE).click().run()
    text = ui_copy["dataset"].read_text(encoding="utf-8")
    assert "q006" in text and "drafted by rule" in text


def test_compare_runs_per_query_filters_by_outcome_and_shows_both_lists(ui_copy):
    at = open_page("evaluate")
    at.multiselect(key=state.EVAL_MODES).set_value(["vector"])
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    at.multiselect(key=state.EVAL_MODES).set_value(["vector", "keyword"])
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    at.switch_page("views/compare.py").run()
    assert not at.exception
    assert len(at.multiselect(key=state.RUNS_DIFF_PICK).value) == 2
    assert "won" in texts(at) and "Gold:" in texts(at)
    at.selectbox(key=state.RUNS_DIFF_OUTCOME).select("tied").run()
    assert not at.exception


def test_sweep_point_runs_as_an_experiment(ui_copy):
    at = open_page("compare")
    at.selectbox(key=state.SWEEP_KNOB_1).select("fusion.bm25_weight")
    at.text_input(key=state.SWEEP_VALUES_1).input("0.1, 0.7")
    at.button(key=state.SWEEP_RUN).click().run()
    assert not at.exception
    table = at.dataframe[-1].value
    assert any(str(v).startswith("current") for v in table.iloc[:, 0])  # 0.7 is the baseline
    at.selectbox(key=state.SWEEP_EXPERIMENT_POINT).select(0).run()
    at.button(key=state.SWEEP_EXPERIMENT).click().run()
    assert not at.exception
    log = (ui_copy["experiments"] / "kb" / "optimization_log.md").read_text(encoding="utf-8")
    assert "sweep point fusion.bm25_weight=0.1" in log


def test_chat_conversations_are_kept_reopened_and_replayed(ui_copy):
    at = open_page("chat")
    at.chat_input(key=state.CHAT_INPUT).set_value("父子块检索的数据结构是什么？").run()
    assert not at.exception
    assert (ui_copy["experiments"] / "kb" / "chats.sqlite").is_file()
    at.button(key=state.CHAT_CLEAR).click().run()  # a new conversation
    assert not at.exception
    assert at.selectbox(key=state.CHAT_HISTORY_PICK).options  # the kept one is listed
    at.button(key=state.CHAT_HISTORY_OPEN).click().run()
    assert not at.exception
    assert "父子块检索的数据结构是什么？" in texts(at)  # reopened
    at.button(key=state.CHAT_REPLAY_RUN).click().run()
    assert not at.exception
    assert "answers unchanged" in texts(at)


def test_knowledge_base_search_shows_query_expansion_terms_when_on(ui_copy):
    # Expansion is off by default (measured to hurt); a config that turns it on must still
    # show the user which terms were added to the keyword query.
    on = {**FAST, "expansion.enabled": True, "expansion.threshold": 0.3}
    EngineConfig().with_overrides(on).save(ui_copy["experiments"] / "kb" / "baseline.yaml")
    at = open_page("knowledge_base")
    at.text_input(key=state.KB_QUERY).input("MCP 传输方式")
    at.button[0].click().run()
    assert not at.exception
    caption = next(c.value for c in at.caption if "results in" in c.value)
    assert " · expansion: " in caption, caption


def _rating_workspace(ui_copy, monkeypatch) -> str:
    """A second config (keyword search) beside the baseline; returns its picker label."""
    from engine.config import EngineConfig
    from tests.ui.conftest import FAST

    variant = ui_copy["root"] / "keyword.yaml"
    EngineConfig().with_overrides({**FAST, "search.mode": "keyword"}).save(variant)
    monkeypatch.setenv("WIKIRAG_CONFIG", str(variant))
    return "--config keyword.yaml"


def test_golden_set_rating_queue_from_the_deep_link(ui_copy, monkeypatch):
    from workbench.eval import judgments as J
    from workbench.ui.rating_panel import queue_params

    cand = _rating_workspace(ui_copy, monkeypatch)
    at = open_page("golden_set")
    for k, v in queue_params("baseline", cand).items():
        at.query_params[k] = v
    at.run()
    assert not at.exception
    assert "Set your name in the sidebar" in texts(at)
    before = {m.label: m.value for m in at.metric}
    at.text_input(key=state.RATER).input("ana").run()
    at.button(key=f"{state.RATE_GRADE}_3").click().run()
    assert not at.exception
    rows = J.read(J.path_for(ui_copy["dataset"]))
    assert [(j.grade, j.rater) for j in rows] == [(3, "ana")]
    after = {m.label: m.value for m in at.metric}
    key = "baseline: unjudged in top 10"
    assert float(after[key].rstrip("%")) < float(before[key].rstrip("%"))
    at.button(key=f"{state.RATE_GRADE}_l").click().run()
    assert J.read(J.path_for(ui_copy["dataset"]))[-1].grade == J.LATER
    assert any("What this set can detect" in s.value for s in at.subheader)


def test_overview_says_when_the_latest_run_is_not_the_baselines(ui_copy):
    from workbench.eval import golden
    from workbench.eval.engines import evaluator
    from workbench.eval.run_record import save_run
    from workbench.workspace import resolve

    w = resolve(ui_copy["kb"], ui_copy["index"], dataset=ui_copy["dataset"],
                experiments_root=ui_copy["experiments"])  # fmt: skip
    other = w.load_config().with_overrides({"fusion.k": 5.0})
    save_run(evaluator(w, other).run(golden.load(ui_copy["dataset"]), other), w.runs_dir)
    at = open_page("overview")
    assert any("not the baseline's config" in x.value for x in at.warning)
