"""Dependencies point one way: apps -> tune / answer / export -> eval -> engine.

Read from the source (every import, including those inside functions), so a shortcut taken
to get something working shows here rather than as an import cycle months later.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# What each layer may import from this repository. The apps (cli, commands, serve, ui,
# bench) sit on top and may import anything below them.
# The base: where a workspace's files are, and progress bars on stderr.
BASE = {"engine", "workbench.workspace", "workbench.progress"}
ALLOWED: dict[str, set[str]] = {
    "engine": {"engine"},
    "workbench.workspace": {"engine", "workbench.workspace"},
    "workbench.progress": {"workbench.progress"},
    "workbench.eval": BASE | {"workbench.eval"},
    "workbench.tune": BASE | {"workbench.eval", "workbench.tune"},
    "workbench.answer": BASE | {"workbench.eval", "workbench.answer"},
    "workbench.export": BASE
    | {"workbench.eval", "workbench.tune", "workbench.answer", "workbench.export"},
}
APPS = ("workbench.cli", "workbench.commands", "workbench.serve", "workbench.ui", "workbench.bench")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
            # `from workbench.eval import golden` names a module too
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def _layer(module: str) -> str | None:
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def _sources() -> list[Path]:
    return sorted(p for pkg in ("engine", "workbench") for p in (REPO / pkg).rglob("*.py"))


def _ours(name: str) -> bool:
    """A module of this repository (the bare package names ``engine``/``workbench`` aside)."""
    return (name.split(".")[0] in {"engine", "workbench"} and "." in name) or name == "engine"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_module_imports_only_what_its_layer_allows(path: Path) -> None:
    module = _module_name(path)
    layer = _layer(module)
    if layer is None:  # an app: may use everything below it
        return
    wrong = sorted(
        name for name in _imports(path) if _ours(name) and _layer(name) not in ALLOWED[layer]
    )
    assert wrong == [], f"{module} ({layer}) imports {wrong}"


def test_only_the_ui_imports_streamlit() -> None:
    users = sorted(
        _module_name(p)
        for p in _sources()
        if any(n == "streamlit" or n.startswith("streamlit.") for n in _imports(p))
    )
    assert all(u.startswith("workbench.ui") for u in users), users


def test_every_package_says_what_it_owns() -> None:
    for init in sorted((REPO / "engine").rglob("__init__.py")) + sorted(
        (REPO / "workbench").rglob("__init__.py")
    ):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 20, (
            f"{init.relative_to(REPO)} has no docstring saying what it owns"
        )


MAX_MODULE_LINES = 500  # past this a module is doing more than one job: split it at a seam


def test_no_module_grows_past_the_size_of_one_job() -> None:
    long = {
        str(p.relative_to(REPO)): n
        for p in _sources()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}, f"over {MAX_MODULE_LINES} lines: {long}"


def test_in_the_engine_only_the_storage_modules_touch_lancedb() -> None:
    users = sorted(
        _module_name(p)
        for p in _sources()
        if any(n == "lancedb" or n.startswith("lancedb.") for n in _imports(p))
    )
    engine_users = [u for u in users if u.startswith("engine")]
    assert engine_users == ["engine.ann", "engine.store"]
    # Outside the engine only the benchmark, which measures LanceDB's own hybrid as a peer.
    assert [u for u in users if not u.startswith("engine")] == ["workbench.bench.peer"]


def test_the_engine_module_map_names_every_engine_module() -> None:
    doc = ast.get_docstring(ast.parse((REPO / "engine" / "__init__.py").read_text("utf-8"))) or ""
    # "  name   what it does", or a second module on the line: ";  name: what it does"
    listed = set(re.findall(r"(?m)^  ([a-z0-9_]+) ", doc)) | set(
        re.findall(r";  ([a-z0-9_]+):", doc)
    )
    modules = {p.stem for p in (REPO / "engine").glob("*.py") if p.stem != "__init__"}
    assert modules - listed == set()
