"""List the UI strings (``t("...")`` literals) that have no Chinese translation yet."""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

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
    from workbench.eval.attribution import CAUSES
    from workbench.tune import catalog, criterion_words
    from workbench.tune.dimension import NAMES
    from workbench.tune.verdict import OUTCOME_WORDS, Verdict

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


def missing(lang: str = "zh") -> dict[str, list[str]]:
    from workbench.ui.i18n import catalog

    cat = catalog(lang)
    wanted = {**core_messages(), **ui_strings()}
    return {s: where for s, where in wanted.items() if s not in cat}


if __name__ == "__main__":
    gaps = missing()
    for s, where in gaps.items():
        sys.stdout.write(f"{', '.join(where)}\t{s}\n")
    sys.exit(1 if gaps else 0)
