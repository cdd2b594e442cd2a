"""List the UI strings (``t("...")`` literals) that have no Chinese translation yet."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

UI = Path(__file__).resolve().parent


def ui_strings(root: Path = UI) -> dict[str, list[str]]:
    """Every literal first argument of a ``t(...)`` call under ``root`` -> where it occurs."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "t"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                found.setdefault(node.args[0].value, []).append(f"{path.name}:{node.lineno}")
    return found


def _literal(node: ast.expr) -> list[str]:
    """The string a Message key expression can be: a literal, or each side of a literal
    joined to a variable word (``"{n} " + noun + " better"`` -> both nouns' forms)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    return []


def core_messages(root: Path = UI.parent) -> dict[str, list[str]]:
    """Every text the core hands the UI as a ``Message``: literal ``Message("...")`` keys in
    workbench/ outside the UI, the miss causes, the scorecard's dimension names and the
    verdict's words and templates."""
    from workbench.eval.attribution import CAUSES
    from workbench.tune.dimension import NAMES
    from workbench.tune.verdict import OUTCOME_WORDS, Verdict

    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if UI in path.parents or path.parent.name == "serve":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "Message"
                and node.args
            ):
                for text in filter(None, _literal(node.args[0])):
                    found.setdefault(text, []).append(f"{path.name}:{node.lineno}")
    for text in [*CAUSES.values(), *OUTCOME_WORDS.values(), *NAMES.values()]:
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
