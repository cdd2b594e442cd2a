"""CSV exports defuse formula cells (OWASP CSV injection) and only one module writes CSV."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pytest

from workbench.export.csv_writer import neutralize
from workbench.export.formats import render_csv, rows_csv
from workbench.export.report import CSV_FIELDS, Report
from workbench.tune.sweep import SweepPoint, SweepResult

HOSTILE = ["=cmd|' /C calc'!A0", "+SUM(1,1)", "-2+3", "@SUM(A1)", "\t=1", "\r=1"]


@pytest.mark.parametrize("cell", HOSTILE)
def test_formula_like_text_gets_a_leading_quote(cell: str) -> None:
    assert neutralize(cell) == "'" + cell


@pytest.mark.parametrize("value", ["plain", "a=b", "", "'=x", -0.05, 3, None])
def test_plain_text_and_numbers_are_unchanged(value) -> None:
    assert neutralize(value) == value


def _cells(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_report_csv_defuses_hostile_golden_fields() -> None:
    row = {
        "id": '=HYPERLINK("http://x","y")',
        "query": "=cmd|' /C calc'!A0",
        "category": "+SUM(1,1)",
        "difficulty": "easy",
        "recall@5": -0.0,
        "mrr": 0.5,
    }
    report = Report("t", {}, "hybrid", {}, {}, [row], {}, [], [], [], [], None)
    rows = _cells(render_csv(report))
    assert rows[0] == list(CSV_FIELDS)
    got = dict(zip(rows[0], rows[1], strict=True))
    assert got["id"] == '\'=HYPERLINK("http://x","y")'
    assert got["query"] == "'=cmd|' /C calc'!A0"
    assert got["category"] == "'+SUM(1,1)"
    assert (got["difficulty"], got["recall@5"], got["mrr"]) == ("easy", "-0.0", "0.5")
    assert not any(c[:1] in "=+-@\t\r" and c for r in rows[1:] for c in r if c != "-0.0")


def test_sweep_csv_defuses_string_values() -> None:
    point = SweepPoint({"rerank.model": "@evil()"}, "h", "hybrid", {"mrr": 0.5}, {}, 1.0, 2.0, 3, 1)
    result = SweepResult(("rerank.model",), {"rerank.model": ["@evil()"]}, (point,), "tune", "b", 0)
    rows = _cells(rows_csv(result.rows()))
    assert "'@evil()" in rows[1] and "@evil()" not in rows[1]


def test_no_module_writes_csv_except_csv_export() -> None:
    root = Path(__file__).resolve().parents[2]
    writers = []
    for path in [*root.glob("workbench/**/*.py"), *root.glob("engine/**/*.py")]:
        text = path.read_text(encoding="utf-8")
        if re.search(r"^\s*import csv\b|csv\.(writer|DictWriter)\(|df\.to_csv\(", text, re.M):
            writers.append(path.relative_to(root).as_posix())
    assert writers == ["workbench/export/csv_writer.py"]
