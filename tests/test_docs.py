"""The docs tell the truth about the tree: the README's "Where things go" names only paths
that exist and names that the files in its row define; nothing cites a file outside the
repository; docs/design.md is there and linked."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# Shorthands in the table ("eval/hierarchy.py", "ui/app.py") are relative to workbench/.
ROOTS = (REPO, REPO / "workbench")


def where_things_go() -> list[str]:
    text = README.read_text(encoding="utf-8")
    section = text.split("### Where things go", 1)[1].split("\n## ", 1)[0]
    return [line for line in section.splitlines() if line.startswith("| ") and "---" not in line]


def _code(row: str) -> list[str]:
    return re.findall(r"`([^`]+)`", row)


def _is_path(token: str) -> bool:
    return "/" in token or token.endswith(".py")


def _resolve(token: str) -> list[Path]:
    """The files a path token names; a ``<placeholder>`` or ``*`` matches any name."""
    pattern = re.sub(r"<[^>]+>", "*", token).rstrip("/")
    out: list[Path] = []
    for root in ROOTS:
        if "*" in pattern:
            out += [p for p in root.glob(pattern) if "__pycache__" not in p.parts]
        elif (root / pattern).exists():
            out.append(root / pattern)
    return out


def _py_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for p in paths:
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p] if p.suffix == ".py" else []
    return files


@cache
def _defined(path: Path) -> frozenset[str]:
    """Names a module defines: functions, classes, assigned and annotated targets."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return frozenset(names)


def _identifier(token: str) -> str | None:
    """``_choice(...)`` -> ``_choice``, ``EngineConfig.index_identity`` -> ``index_identity``;
    None for what is not a Python name (``report --format``, ``embedding.*``)."""
    name = re.sub(r"\(.*\)$", "", token)
    if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        return None
    return name.rsplit(".", 1)[-1]


ROWS = where_things_go()


def test_the_where_things_go_table_is_found() -> None:
    assert len(ROWS) >= 8  # a renamed heading would otherwise make the checks below vacuous


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.split("|")[1].strip())
def test_every_path_in_where_things_go_exists(row: str) -> None:
    missing = [t for t in _code(row) if _is_path(t) and not _resolve(t)]
    assert not missing, f"README 'Where things go' names paths that do not exist: {missing}"


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.split("|")[1].strip())
def test_every_name_in_a_where_things_go_row_is_defined_by_a_file_of_that_row(row: str) -> None:
    files = _py_files([p for t in _code(row) if _is_path(t) for p in _resolve(t)])
    defined = set().union(*(_defined(f) for f in files)) if files else set()
    text = "\n".join(f.read_text(encoding="utf-8") for f in files)
    wrong = []
    for token in _code(row):
        name = _identifier(token)
        if name is None or _is_path(token):
            continue
        # A dotted use (``st.Page``) may be a library's name used there; a bare one must
        # be defined by one of the row's files.
        if name not in defined and not ("." in token and re.sub(r"\(.*\)$", "", token) in text):
            wrong.append(token)
    assert not wrong, f"names the row's files do not define: {wrong} (files: {files})"


CITED_OUTSIDE = re.compile(r"\b(DESIGN|MODELS|STYLE)\.md\b|\.\./shared/(DESIGN|MODELS|STYLE)")


def test_nothing_in_the_repository_cites_a_design_or_model_file_outside_it() -> None:
    hits = []
    for path in REPO.rglob("*"):
        if not path.is_file() or path.suffix not in {".py", ".md", ".yaml", ".toml", ".jsonl"}:
            continue
        if {".git", ".venv", "node_modules", ".wikirag"} & set(path.parts):
            continue
        if path == Path(__file__):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines()):
            if CITED_OUTSIDE.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n + 1}")
    assert not hits, f"references to files outside the repository: {hits}"


def test_the_design_document_exists_and_the_readme_links_it() -> None:
    design = REPO / "docs" / "design.md"
    assert design.is_file()
    text = design.read_text(encoding="utf-8")
    for heading in ("Architecture", "Data contracts", "acceptance rule", "index life cycle"):
        assert heading in text
    assert "(docs/design.md)" in README.read_text(encoding="utf-8")
