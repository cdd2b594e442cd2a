"""The page frame's progress bar."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _progress_app(fail: bool) -> AppTest:
    def app(fail: bool) -> None:
        import streamlit as st

        from workbench.ui.components import progress_bar

        try:
            with progress_bar("Working") as progress:
                progress(2, 5, "chapters")
                if fail:
                    raise RuntimeError("the embedder is down")
            st.success("done")
        except RuntimeError as exc:
            st.error(str(exc))

    return AppTest.from_function(app, kwargs={"fail": fail}).run()


def test_the_progress_bar_is_gone_once_the_work_is_done() -> None:
    at = _progress_app(fail=False)
    assert not at.get("progress")
    assert [s.value for s in at.success] == ["done"]


def test_a_failure_is_shown_without_a_progress_bar_frozen_beside_it() -> None:
    at = _progress_app(fail=True)
    assert not at.get("progress")
    assert [e.value for e in at.error] == ["the embedder is down"]
