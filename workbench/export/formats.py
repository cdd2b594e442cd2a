"""The one registry of export formats: HTML, Markdown, CSV, JSON, TREC run and TREC qrels.

`wikirag report --format`, `wikirag eval --trec-run / --trec-qrels` and the Reports page
all render through :data:`FORMATS`, so a new format is one entry here (plus its renderer).
The report formats render a :class:`~workbench.export.report.Report`; the TREC formats
render the run record itself, through the project's one TREC writer
(:mod:`workbench.eval.trec`). Tables that are not a run (a sweep) go out through
:func:`rows_csv`, the same CSV writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from workbench.eval.golden import GoldenSet
from workbench.eval.messages import Translate
from workbench.eval.run_record import RunRecord
from workbench.eval.trec import format_qrels, format_ranked
from workbench.export.csv_writer import to_csv
from workbench.export.html_report import render_html
from workbench.export.markdown_report import render_markdown
from workbench.export.report import CSV_FIELDS, Report


@dataclass(frozen=True)
class ExportSource:
    """What an export renders: a run record and the mode shown; the report built from them
    (for the report formats); graded labels for TREC qrels when the golden file is known
    (else the record's own labels, grade 1)."""

    record: RunRecord
    mode: str
    report: Report | None = None
    qrels: Mapping[str, Mapping[str, int]] | None = None
    # the report's own words in the reader's language (the UI's translator); None: English
    translate: Translate | None = None

    def need_report(self, fmt: str) -> Report:
        if self.report is None:
            raise ValueError(f"format {fmt} renders a report; build one with build_report()")
        return self.report


@dataclass(frozen=True)
class ExportFormat:
    """One entry of the registry: how the CLI names it, how the UI offers it, how to render."""

    name: str  # `wikirag report --format NAME`
    label: str  # the Reports page's download button (a UI catalog entry)
    suffix: str  # file name suffix of a download
    mime: str
    render: Callable[[ExportSource], str]
    shows_report: bool  # renders the Report (else the run record alone)
    shows_scorecard: bool  # includes the scorecard section (worth computing one)


def render_csv(report: Report) -> str:
    """One row per query, header first; formula-like cells defused (csv_writer)."""
    return to_csv(report.queries, CSV_FIELDS)


def render_json(report: Report) -> str:
    return json.dumps(report.to_dict(), ensure_ascii=False, indent=1, default=str)


def trec_run(record: RunRecord, mode: str, tag: str | None = None) -> str:
    """TREC run text of one mode, ranked exactly as the run was evaluated."""
    tag = tag or f"wikirag-{record.config_hash}-{mode}"
    return format_ranked(
        [(q.item.id, [r.node_id for r in q.ranked]) for q in record.for_mode(mode)], tag
    )


def golden_qrels(gs: GoldenSet) -> dict[str, dict[str, int]]:
    """The golden set's graded labels of its answerable queries, ``{qid: {docid: grade}}``."""
    return {it.id: it.qrels for it in gs.answerable()}


def _trec_qrels(src: ExportSource) -> str:
    qrels = src.qrels if src.qrels is not None else golden_qrels(src.record.golden())
    return format_qrels(qrels)


def _html(s: ExportSource) -> str:
    return render_html(s.need_report("html"), translate=s.translate)


def _markdown(s: ExportSource) -> str:
    return render_markdown(s.need_report("md"), s.translate)


def _csv(s: ExportSource) -> str:
    return render_csv(s.need_report("csv"))


def _json(s: ExportSource) -> str:
    return render_json(s.need_report("json"))


def _trec_run(s: ExportSource) -> str:
    return trec_run(s.record, s.mode)


_REPORT = {"shows_report": True, "shows_scorecard": True}
_RECORD = {"shows_report": False, "shows_scorecard": False}
FORMATS: dict[str, ExportFormat] = {
    f.name: f
    for f in (
        ExportFormat("html", "HTML", "html", "text/html", _html, **_REPORT),
        ExportFormat("md", "Markdown", "md", "text/markdown", _markdown, **_REPORT),
        # The CSV is the per-query table only: no scorecard to compute for it.
        ExportFormat("csv", "CSV", "csv", "text/csv", _csv, True, False),
        ExportFormat("json", "JSON", "json", "application/json", _json, **_REPORT),
        ExportFormat("trec-run", "TREC run", "run", "text/plain", _trec_run, **_RECORD),
        ExportFormat("trec-qrels", "TREC qrels", "qrels", "text/plain", _trec_qrels, **_RECORD),
    )
}


def export_format(name: str) -> ExportFormat:
    if name not in FORMATS:
        raise ValueError(f"format must be one of {', '.join(FORMATS)}; got {name!r}")
    return FORMATS[name]


def render(name: str, source: ExportSource) -> str:
    """``source`` in format ``name`` (one of :data:`FORMATS`)."""
    return export_format(name).render(source)


def write(name: str, source: ExportSource, path: str | Path) -> Path:
    """Render ``source`` in ``name`` and write it atomically to ``path``."""
    out = Path(path)
    atomic_write_text(out, render(name, source))
    return out


def rows_csv(rows: Iterable[Mapping[str, Any]]) -> str:
    """A table as CSV, columns in the first row's key order (e.g. a sweep's points)."""
    rows = list(rows)
    return to_csv(rows, list(rows[0]) if rows else [])
