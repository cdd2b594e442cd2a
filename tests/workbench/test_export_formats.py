"""One registry of export formats serves the CLI, the Reports page and `eval --trec-*`; one
TREC writer; the HTML template escapes every value; tuning never imports the exports."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.workbench.test_report import LOG, _run
from workbench.commands import report_cmd
from workbench.eval.golden import GoldenItem, GoldenSet
from workbench.export.formats import (
    FORMATS,
    ExportSource,
    export_format,
    golden_qrels,
    render,
    rows_csv,
    write,
)
from workbench.export.html_report import render_html
from workbench.export.report import build_report

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def source() -> ExportSource:
    record = _run()
    report = build_report(None, record, log_records=LOG)
    return ExportSource(record, "hybrid", report)


def test_cli_offers_exactly_the_registry_formats() -> None:
    assert tuple(FORMATS) == report_cmd.FORMATS
    assert [f.suffix for f in FORMATS.values()] == ["html", "md", "csv", "json", "run", "qrels"]


def _no_figure_ids(text: str) -> str:
    return re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", text)


def test_every_format_renders_and_writes_the_same_text(source, tmp_path: Path) -> None:
    for name, fmt in FORMATS.items():
        text = _no_figure_ids(render(name, source))  # plotly names each figure's div anew
        written = write(name, source, tmp_path / f"r.{fmt.suffix}").read_text(encoding="utf-8")
        assert text and _no_figure_ids(written) == text, name


def test_unknown_format_and_missing_report_are_clear_errors(source) -> None:
    with pytest.raises(ValueError, match="format must be one of html, md, csv"):
        export_format("pdf")
    with pytest.raises(ValueError, match="build one with build_report"):
        render("md", ExportSource(source.record, "hybrid"))


def test_trec_run_ranks_each_query_as_evaluated(source) -> None:
    lines = render("trec-run", source).splitlines()
    tag = f"wikirag-{source.record.config_hash}-hybrid"
    assert lines[:2] == [f"q1 Q0 d#a 1 2.0 {tag}", f"q1 Q0 d#b 2 1.0 {tag}"]
    assert [ln.split()[0] for ln in lines] == ["q1", "q1", "q2", "q3", "q3"]


def test_trec_qrels_use_graded_golden_labels_when_given_else_the_records(source) -> None:
    # A listed chapter without a grade is "relevant", grade 2 on the judging scale.
    assert render("trec-qrels", source) == "q1 0 d#a 2\nq2 0 d#b 2\nq3 0 d#c 2\nq3 0 d#z 2\n"
    gs = GoldenSet(
        "g",
        (
            GoldenItem("q1", "x", ("d#a", "d#b"), grades={"d#a": 3}),
            GoldenItem("q9", "y", (), unanswerable=True),
        ),
    )
    graded = ExportSource(source.record, "hybrid", qrels=golden_qrels(gs))
    assert render("trec-qrels", graded) == "q1 0 d#a 3\nq1 0 d#b 2\n"


def test_trec_lines_are_written_only_by_the_trec_module() -> None:
    writers = [
        p.relative_to(ROOT).as_posix()
        for p in [*ROOT.glob("workbench/**/*.py"), *ROOT.glob("engine/**/*.py")]
        if re.search(r"""f["'][^"'\n]*\bQ0\b""", p.read_text(encoding="utf-8"))
        or re.search(r"""f["'][^"'\n]*\} 0 \{""", p.read_text(encoding="utf-8"))
    ]
    assert writers == ["workbench/eval/trec.py"]


def test_tuning_and_evaluation_never_import_the_exports() -> None:
    importers = [
        p.relative_to(ROOT).as_posix()
        for p in [*ROOT.glob("workbench/tune/*.py"), *ROOT.glob("workbench/eval/*.py")]
        if "workbench.export" in p.read_text(encoding="utf-8")
    ]
    assert importers == []


def test_table_csv_keeps_column_order_and_defuses_formulas() -> None:
    text = rows_csv([{"b": "=1+1", "a": 0.5}, {"b": "x", "a": -1.0}])
    assert text == "b,a\n'=1+1,0.5\nx,-1.0\n"
    assert rows_csv([]) == "\n"


def test_html_escapes_every_value_the_way_reports_always_did(source) -> None:
    hostile = "<img src=x onerror=alert(1)> 'q' \"d\" & co"
    report = build_report(None, source.record, log_records=[])
    report.title = hostile
    report.notes = [hostile]
    report.config_yaml = hostile
    report.queries[0]["category"] = hostile
    page = render_html(report, include_plotlyjs=False)
    escaped = "&lt;img src=x onerror=alert(1)&gt; &#x27;q&#x27; &quot;d&quot; &amp; co"
    assert "<img" not in page
    assert page.count(escaped) == 5  # <title>, <h1>, the note, the config, the results cell


def test_eval_and_report_write_the_same_trec_files(tmp_path: Path, monkeypatch) -> None:
    """`eval --trec-*` renders the run it just scored; `report --format trec-*` the saved
    record of that run: the files are the same."""
    from workbench.cli import main
    from workbench.eval.run_record import save_run

    run = _run()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wiki").mkdir()
    save_run(run, tmp_path / "experiments" / "wiki" / "runs")
    fresh = ExportSource(run, "hybrid")
    for fmt in ("trec-run", "trec-qrels"):
        out = tmp_path / fmt
        assert main(["report", "--format", fmt, "--out", str(out)]) == 0
        assert out.read_text(encoding="utf-8") == render(fmt, fresh)


def test_a_translator_turns_the_reports_own_words_and_leaves_the_data(source) -> None:
    import dataclasses

    from workbench.ui.i18n import catalog

    zh = catalog("zh")
    report = build_report(None, source.record, log_records=[])
    english = {name: render(name, source) for name in ("md", "html")}
    chinese = dataclasses.replace(source, translate=lambda s: zh.get(s, s))
    md, page = render("md", chinese), render("html", chinese)
    assert "## 指标" in md and "## Metrics" not in md and "WikiRAG 评测报告" in md
    assert "<h2>指标</h2>" in page and "<h2>Metrics</h2>" not in page
    assert f"| {report.queries[0]['id']} |" in md  # ids and the golden set are data
    assert "## Metrics" in english["md"] and "<h2>Metrics</h2>" in english["html"]
