"""Every page of the Streamlit workbench under AppTest, against a small hash-embedder KB."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.ui.conftest import APP

TIMEOUT = 60


def open_page(page: str | None = None) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.run()
    if page:
        at.switch_page(f"pages/{page}.py").run()
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
    at.text_input(key="kb_filter").input("传输方式").run()
    node = next(s for s in at.selectbox if s.key and s.key.startswith("kb_node_"))
    assert "传输方式" in node.value
    at.text_input(key="kb_query").input("MCP 传输方式")
    at.button[0].click().run()  # the form's submit button sends the typed query
    assert not at.exception
    assert any("MCP" in e.label for e in at.expander), [e.label for e in at.expander]
    stages = {m.label for m in at.metric}
    assert stages, "per-stage timings shown"


def test_golden_set_edit_label_and_save(ui_copy):
    at = open_page("golden_set")
    assert not at.exception
    assert at.title[0].value == "Golden set"
    assert not at.error, [e.value for e in at.error]  # the fixture's set is valid
    at.text_input(key="golden_new_query").input("MCP 网关做什么？")
    next(b for b in at.button if b.label == "Add query").click().run()
    assert not at.exception
    assert "unsaved changes" in texts(at)
    assert any("q006" in e.value for e in at.error)  # needs 1-4 relevant ids
    at.selectbox(key="golden_target").select("q006").run()
    at.text_input(key="golden_tree_filter").input("MCP 网关").run()
    at.button(key="golden_add_tree").click().run()
    assert not at.exception
    assert not at.error, [e.value for e in at.error]
    at.button(key="golden_save").click().run()
    assert not at.exception
    text = ui_copy["dataset"].read_text(encoding="utf-8")
    assert "MCP 网关做什么？" in text and "q006" in text


def test_golden_set_conflict_keeps_edits(ui_copy):
    at = open_page("golden_set")
    at.text_input(key="golden_new_query").input("一个新问题")
    next(b for b in at.button if b.label == "Add query").click().run()
    path = ui_copy["dataset"]
    path.write_text(path.read_text(encoding="utf-8") + "# edited elsewhere\n", encoding="utf-8")
    at.button(key="golden_save").click().run()
    assert not at.exception
    assert any("changed outside the workbench" in e.value for e in at.error)
    assert "一个新问题" not in path.read_text(encoding="utf-8")
    at.button(key="golden_overwrite").click().run()
    assert not at.exception
    assert "一个新问题" in path.read_text(encoding="utf-8")


def test_golden_set_drift_and_pooling(ui_copy):
    path = ui_copy["dataset"]
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("/传输方式", "/传输方法"), encoding="utf-8")
    at = open_page("golden_set")
    assert not at.exception
    assert any("unknown node id" in e.value for e in at.error)
    at.button(key="golden_remap").click().run()
    assert not at.exception
    assert not any("unknown node id" in e.value for e in at.error)
    at.button(key="golden_pool_run").click().run()
    assert not at.exception


def test_evaluate_runs_and_drills_down(ui_copy):
    at = open_page("evaluate")
    assert not at.exception
    assert at.title[0].value == "Evaluate"
    assert "No run yet" in texts(at)
    at.multiselect(key="eval_modes").set_value(["hybrid", "keyword"])
    next(b for b in at.button if b.label == "Run evaluation").click().run()
    assert not at.exception
    labels = {m.label for m in at.metric}
    assert {"Recall@5", "Recall@10", "Recall@20", "MRR"} <= labels
    assert any(band in texts(at) for band in ("poor", "acceptable", "good", "excellent"))
    assert len(list((ui_copy["experiments"] / "kb" / "runs").glob("*.json"))) == 1
    at.radio(key="eval_mode_shown").set_value("keyword").run()
    at.selectbox(key="eval_drill").select("q002").run()
    assert not at.exception
    assert "Failures by cause" in texts(at)


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
