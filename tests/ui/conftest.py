"""A small workspace for the UI tests: 3 wiki files, a hash-embedder index, a tiny golden set."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.config import EngineConfig
from engine.tree import parse_kb

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "workbench" / "ui" / "app.py"
WIKI_FILES = ("rag/parent-child-chunks.md", "evaluation/evaluation-faq.md", "agents/mcp.md")
FAST = {"embedding.provider": "hash", "expansion.enabled": False}

# (query, title of the relevant chapter, difficulty, category)
QUERIES = (
    ("父子块检索的数据结构是什么？", "数据结构", "easy", "rag"),
    ("MCP 的传输方式有哪些", "传输方式", "medium", "agents"),
    ("黄金集多大才够？", "黄金集多大才够？", "easy", "evaluation"),
    ("子块命中多个父块时如何排序", "子块命中多个父块时如何排序？", "hard", "rag"),
    (
        "为什么主指标是 Recall@5",
        "为什么主指标是 Recall@5 而不是 Recall@10？",
        "medium",
        "evaluation",
    ),
)


def node_by_title(kb, title: str) -> str:
    return next(n.node_id for n in kb.nodes.values() if n.title == title)


@pytest.fixture(scope="session")
def ui_workspace(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Paths of a ready workspace: kb/, index/, datasets/kb.yaml, experiments/kb/baseline.yaml."""
    root = tmp_path_factory.mktemp("uiws")
    kb_dir = root / "kb"
    for rel in WIKI_FILES:
        (kb_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / "wiki" / rel, kb_dir / rel)
    kb = parse_kb(kb_dir)
    cfg = EngineConfig().with_overrides(FAST)
    exp = root / "experiments" / "kb"
    exp.mkdir(parents=True)
    cfg.save(exp / "baseline.yaml")
    from engine.indexer import build_index

    build_index(kb, cfg, str(root / "index"))
    lines = ["name: kb", "queries:"]
    for n, (q, title, diff, cat) in enumerate(QUERIES, 1):
        lines += [
            f"  - id: q{n:03d}",
            f"    query: {q}",
            f"    relevant: ['{node_by_title(kb, title)}']",
            f"    difficulty: {diff}",
            f"    category: {cat}",
        ]
    (root / "datasets").mkdir()
    (root / "datasets" / "kb.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return {
        "root": root,
        "kb": kb_dir,
        "index": root / "index",
        "dataset": root / "datasets" / "kb.yaml",
        "experiments": root / "experiments",
    }


@pytest.fixture
def ui_env(ui_workspace: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """Point the app at the test workspace through its env vars."""
    monkeypatch.setenv("WIKIRAG_LANG", "en")  # the assertions read English strings
    monkeypatch.setenv("WIKIRAG_KB", str(ui_workspace["kb"]))
    monkeypatch.setenv("WIKIRAG_INDEX", str(ui_workspace["index"]))
    monkeypatch.setenv("WIKIRAG_DATASET", str(ui_workspace["dataset"]))
    monkeypatch.setenv("WIKIRAG_EXPERIMENTS", str(ui_workspace["experiments"]))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("WIKIRAG_LLM_MODEL", raising=False)
    return ui_workspace


@pytest.fixture
def ui_copy(
    ui_workspace: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Path]:
    """A private copy of the workspace for tests that write (golden set, experiments)."""
    root = tmp_path / "ws"
    shutil.copytree(ui_workspace["root"], root)
    paths = {k: root / v.relative_to(ui_workspace["root"]) for k, v in ui_workspace.items()}
    paths["root"] = root
    monkeypatch.setenv("WIKIRAG_LANG", "en")
    monkeypatch.setenv("WIKIRAG_KB", str(paths["kb"]))
    monkeypatch.setenv("WIKIRAG_INDEX", str(paths["index"]))
    monkeypatch.setenv("WIKIRAG_DATASET", str(paths["dataset"]))
    monkeypatch.setenv("WIKIRAG_EXPERIMENTS", str(paths["experiments"]))
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("WIKIRAG_LLM_MODEL", raising=False)
    return paths
