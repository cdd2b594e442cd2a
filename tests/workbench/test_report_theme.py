"""The HTML report keeps its own chart colours when built inside Streamlit (the Reports page):
Streamlit's plotly theme, active in that process, must not leak into the exported figures."""

from __future__ import annotations

import json
import re

import plotly.io as pio
import pytest

from tests.workbench.test_report import LOG, _run
from workbench.export.figures import REPORT_COLORWAY
from workbench.export.html_report import render_html
from workbench.export.report import build_report
from workbench.tune.scorecard import build_scorecard


@pytest.fixture
def streamlit_theme():
    """What importing st.plotly_chart does in the UI process: the "streamlit" template as
    plotly's default (restored afterwards so other tests see plotly's own default)."""
    from streamlit.elements.lib.streamlit_plotly_theme import configure_streamlit_plotly_theme

    saved = pio.templates.default
    configure_streamlit_plotly_theme()
    assert pio.templates.default == "streamlit"
    yield
    pio.templates.default = saved


def _figures(page: str) -> list[dict]:
    """The figure JSON objects plotly writes into the page (Plotly.newPlot(id, data, layout))."""
    figs = []
    for m in re.finditer(r"Plotly\.newPlot\(\s*\"[^\"]+\",\s*", page):
        data, end = json.JSONDecoder().raw_decode(page, m.end())
        rest = page[end:].lstrip().lstrip(",").lstrip()
        layout, _ = json.JSONDecoder().raw_decode(rest)
        figs.append({"data": data, "layout": layout})
    return figs


def test_report_charts_keep_their_colours_under_the_streamlit_theme(streamlit_theme):
    run = _run()
    card = build_scorecard(run, kb=None, gs=None, engine_stats={})
    record = run
    page = render_html(build_report(None, record, scorecard=card, log_records=LOG))
    figs = _figures(page)
    assert len(figs) >= 3  # categories, failures, optimizations
    for fig in figs:
        layout = fig["layout"]
        assert layout["colorway"] == list(REPORT_COLORWAY)
        assert layout["paper_bgcolor"] == "white" and layout["plot_bgcolor"] == "white"
        # plotly_white's own settings, not the streamlit template's placeholders
        assert layout["template"]["layout"]["xaxis"]["gridcolor"] == "#EBF0F8"
        colours = set(re.findall(r"#[0-9a-fA-F]{6}", json.dumps(fig)))
        assert not {c for c in colours if c.lower().startswith("#00000")}, colours
