"""List the UI strings (``t("...")`` literals) that have no Chinese translation yet."""

from __future__ import annotations

import ast
import dataclasses
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from workbench.eval.attribution import CAUSES
from workbench.eval.messages import Message
from workbench.export.html_report import render_html
from workbench.export.markdown_report import render_markdown
from workbench.export.report import Report
from workbench.tune import catalog, criterion_words
from workbench.tune.dimension import NAMES
from workbench.tune.verdict import OUTCOME_WORDS, Verdict
from workbench.ui import i18n

UI = Path(__file__).resolve().parent


def _literal_calls(paths: Iterable[Path], name: str) -> Iterator[tuple[str, str]]:
    """(text, "file:line") for each ``name("literal", ...)`` call in ``paths``."""
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == name
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                yield node.args[0].value, f"{path.name}:{node.lineno}"


def ui_strings(root: Path = UI) -> dict[str, list[str]]:
    """Every literal first argument of a ``t(...)`` call under ``root`` -> where it occurs."""
    found: dict[str, list[str]] = {}
    for text, where in _literal_calls(sorted(root.rglob("*.py")), "t"):
        found.setdefault(text, []).append(where)
    return found


def core_messages(root: Path = UI.parent) -> dict[str, list[str]]:
    """Every text the core hands the UI as a ``Message``: literal ``Message("...")`` keys in
    workbench/ outside the UI, the miss causes, the scorecard's dimension names, the
    verdict's words and templates, the strategy catalog's words and the acceptance
    criteria's templates."""

    found: dict[str, list[str]] = {}
    core = [
        p for p in sorted(root.rglob("*.py")) if UI not in p.parents and p.parent.name != "serve"
    ]
    for text, where in _literal_calls(core, "Message"):
        if text:  # an empty Message default is no key
            found.setdefault(text, []).append(where)
    words = [*CAUSES.values(), *OUTCOME_WORDS.values(), *NAMES.values()]
    for text in [*words, *catalog.texts(), *criterion_words.texts()]:
        found.setdefault(text, []).append("words")
    for better in (1, 2):  # the headline's template names "query" or "queries"
        v = Verdict("mrr", 0, 0, 0, 1, 95, better, 0, 0, "accepted", ())
        found.setdefault(v.message.key, []).append("verdict.py")
    return found


def report_words() -> dict[str, list[str]]:
    """Every text the report renderers ask their translator for: a report with every
    section filled, rendered as Markdown and HTML by a translator that records its input
    (the words in the HTML template and the tables have no ``Message`` to scan)."""

    asked: dict[str, list[str]] = {}

    def record(text: str) -> str:
        asked.setdefault(text, []).append("report")
        return text

    cause = next(iter(CAUSES))
    row: dict[str, Any] = {"id": "q1", "query": "q", "difficulty": "easy", "category": "c", "recall@5": 1.0,
           "mrr": 1.0, "first_relevant_rank": 1, "cause": cause, "error": "x"}  # fmt: skip
    groups: dict[str, dict[str, float]] = {"easy": {"n": 1}, "medium": {"n": 1}, "hard": {}}
    report = Report(
        title="", run={"run_id": "r", "name": "n", "config_hash": "h", "dataset": "d",
                       "dataset_hash": "h", "split": "all", "rerank": True, "queries": 1},
        mode="hybrid", means={}, latency={}, queries=[row],
        breakdowns={"difficulty": groups, "category": {"c": {"n": 1}}, "language": {}},
        failures=[{"cause": cause, "label": CAUSES[cause], "queries": [row]}],
        optimizations=[{"number": 1, "date": "", "tier": "manual", "title": "t",
                        "decision": d, "tune_recall@5": [0.1, 0.2], "tune_mrr": [None, None],
                        "holdout_recall@5": [0.1, 0.2]} for d in ("accepted", "rolled back")],
        trajectory=[{"experiment": 0, "recall@5": 0.5}], recommendations=[], scorecard=None,
        config_yaml="x: 1", title_message=Message("{text}", {"text": ""}),
    )  # fmt: skip
    empty = dataclasses.replace(report, failures=[], optimizations=[], trajectory=[])
    for r in (report, empty):
        render_markdown(r, record)
        render_html(r, include_plotlyjs=False, translate=record)
    return asked


def missing(lang: str = "zh") -> dict[str, list[str]]:
    cat = i18n.catalog(lang)
    wanted = {**core_messages(), **report_words(), **ui_strings()}
    return {s: where for s, where in wanted.items() if s not in cat}


if __name__ == "__main__":
    gaps = missing()
    for s, where in gaps.items():
        sys.stdout.write(f"{', '.join(where)}\t{s}\n")
    sys.exit(1 if gaps else 0)
