"""The config value widget: a number input of the key's own type."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest


def _value_widget_app(key: str, current: object) -> AppTest:
    def app(key: str, current: object) -> None:
        import streamlit as st

        from workbench.ui.tuning_widgets import config_value_widget

        st.session_state["picked"] = config_value_widget(key, current, widget_key="value")

    return AppTest.from_function(app, kwargs={"key": key, "current": current}).run()


def test_an_int_key_gets_a_whole_number_input_and_returns_an_int() -> None:
    at = _value_widget_app("fusion.multiplier", 3)
    box = at.number_input(key="value")
    assert (box.value, box.step, box.format) == (3, 1, "%d")
    box.set_value(5).run()
    assert at.session_state["picked"] == 5
    assert type(at.session_state["picked"]) is int


def test_a_float_key_gets_a_float_input_within_its_range() -> None:
    at = _value_widget_app("fusion.bm25_weight", 1.5)
    box = at.number_input(key="value")
    assert (box.value, box.format, box.min) == (1.5, "%.4g", 0.0)
    box.set_value(0.25).run()
    assert at.session_state["picked"] == 0.25
    assert type(at.session_state["picked"]) is float
