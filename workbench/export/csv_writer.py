"""The one way the workbench writes CSV: cells that a spreadsheet would run are defused.

A golden query ``=cmd|' /C calc'!A0`` or a category ``+SUM(1,1)`` opened in Excel or
LibreOffice runs as a formula (CSV injection). Following OWASP's advice, any text cell
starting with ``=``, ``+``, ``-``, ``@``, tab or carriage return gets a leading ``'``,
which spreadsheets show as plain text. Numbers are left alone: a Python float ``-0.05``
is data, not a formula, and must stay a number for whoever reads the file.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralize(value: Any) -> Any:
    """``value`` with a leading ``'`` if it is text a spreadsheet would read as a formula."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


def to_csv(rows: Iterable[Mapping[str, Any]], fieldnames: Sequence[str]) -> str:
    """Header plus one line per row; missing keys and None become empty cells."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([neutralize(str(f)) for f in fieldnames])
    for row in rows:
        w.writerow([neutralize("" if row.get(f) is None else row.get(f)) for f in fieldnames])
    return buf.getvalue()
