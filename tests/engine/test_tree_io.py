"""chapter_trees.json export/import and the `wikirag tree` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.chapters import KnowledgeBase
from engine.errors import EngineError
from engine.tree import parse_kb
from engine.tree_io import export_chapter_trees, import_chapter_trees
from workbench.cli import main


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    root = tmp_path / "wiki"
    (root / "guide").mkdir(parents=True)
    (root / "index.md").write_text(
        "---\ntitle: Home\nkeywords: [a, b]\npriority: P0\n---\nWelcome.\n\n# Home\n\n## Start\n",
        encoding="utf-8",
    )
    (root / "guide" / "setup.md").write_text(
        "# 安装\n\n## Linux\n\n### apt\n\n## Linux\n\n#### 深层\n", encoding="utf-8"
    )
    (root / "broken.md").write_text("# A\n\n```\nnever closed\n", encoding="utf-8")
    return root


def signature(kb: KnowledgeBase) -> list[tuple]:
    return [
        (
            n.node_id,
            n.doc_id,
            n.title,
            n.level,
            n.ordinal,
            n.parent_id,
            n.children_ids,
            n.breadcrumb,
            n.line,
            n.anchor,
            n.summary,
            n.file_path,
            n.content_hash,
            n.frontmatter,
        )
        for n in kb.nodes.values()
    ]


def test_export_schema(kb_dir: Path) -> None:
    data = export_chapter_trees(parse_kb(kb_dir))
    assert data["version"] == "1.0"
    assert data["generatedAt"].endswith("Z")
    assert data["statistics"] == {"totalDocuments": 3, "totalChapters": 8, "maxDepth": 4}
    assert [d["docId"] for d in data["documents"]] == ["broken", "guide/setup", "index"]
    setup = data["documents"][1]
    assert setup["filePath"] == "guide/setup.md"
    assert [c["id"] for c in setup["chapters"]] == [
        "guide/setup#安装",
        "guide/setup#安装/linux",
        "guide/setup#安装/linux/apt",
        "guide/setup#安装/linux~2",
        "guide/setup#安装/linux~2/深层",
    ]
    first = setup["chapters"][0]
    assert first == {
        "id": "guide/setup#安装",
        "node_id": "guide/setup#安装",
        "title": "安装",
        "level": 1,
        "ordinal": 1,
        "parentId": "guide/setup",
        "line": 1,
        "anchor": "安装",
        "summary": "",
        "breadcrumb": ["安装"],
        "file_path": "guide/setup.md",
        "children_ids": ["guide/setup#安装/linux", "guide/setup#安装/linux~2"],
        "content_hash": first["content_hash"],
    }
    assert [c["anchor"] for c in setup["chapters"]] == ["安装", "linux", "apt", "linux-1", "深层"]
    index = data["documents"][2]
    assert index["frontmatter"] == {"title": "Home", "keywords": ["a", "b"], "priority": "P0"}
    assert index["title"] == "Home" and index["summary"] == "Welcome."
    assert [(p["file_path"], p["line"]) for p in data["problems"]] == [("broken.md", 3)]
    json.dumps(data)  # JSON-ready as is


def test_round_trip_preserves_everything_but_content(kb_dir: Path, tmp_path: Path) -> None:
    kb = parse_kb(kb_dir)
    path = tmp_path / "chapter_trees.json"
    path.write_text(json.dumps(export_chapter_trees(kb), ensure_ascii=False), encoding="utf-8")
    back = import_chapter_trees(path)
    assert signature(back) == signature(kb)
    assert all(n.content == "" for n in back.nodes.values())
    assert back.problems == kb.problems
    assert back.documents[0].problems == kb.documents[0].problems
    assert back.stats() == kb.stats()
    assert back.root == kb.root
    assert signature(import_chapter_trees(export_chapter_trees(back))) == signature(kb)


def test_round_trip_on_a_real_corpus(shared_data: Path) -> None:
    kb = parse_kb(shared_data / "corpora" / "vue-docs-zh-cn")
    back = import_chapter_trees(json.loads(json.dumps(export_chapter_trees(kb))))
    assert signature(back) == signature(kb)


def _valid() -> dict:
    return {
        "version": "1.0",
        "documents": [
            {
                "docId": "a",
                "filePath": "a.md",
                "frontmatter": {},
                "chapters": [
                    {
                        "id": "a#x",
                        "node_id": "a#x",
                        "title": "X",
                        "level": 1,
                        "ordinal": 1,
                        "parentId": "a",
                        "line": 1,
                        "breadcrumb": ["X"],
                    }
                ],
            }
        ],
    }


def test_minimal_file_imports() -> None:
    kb = import_chapter_trees(_valid())
    assert kb.get("a").children_ids == ("a#x",)
    assert kb.get("a#x").parent_id == "a"
    assert kb.get("a").title == "a"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.pop("documents"), "the top level lacks 'documents'"),
        (lambda d: d.update(version="2.0"), "has version '2.0'"),
        (lambda d: d["documents"][0].pop("docId"), "documents[0] lacks 'docId'"),
        (
            lambda d: d["documents"][0]["chapters"][0].update(level="1"),
            "documents[0].chapters[0] has 'level' of type str",
        ),
        (
            lambda d: d["documents"][0]["chapters"][0].update(level=9),
            "has level 9; chapters have levels 1 to 6",
        ),
        (
            lambda d: d["documents"][0]["chapters"][0].update(parentId="zz"),
            "has parentId 'zz', not in this document",
        ),
        (
            lambda d: d["documents"][0]["chapters"][0].update(children_ids=["nope"]),
            "children_ids that disagree",
        ),
        (lambda d: d["documents"].append(d["documents"][0]), "repeats node id 'a'"),
    ],
)
def test_malformed_files_raise_engine_error(mutate, message: str) -> None:
    data = _valid()
    mutate(data)
    with pytest.raises(EngineError, match=message.replace("[", r"\[").replace("]", r"\]")):
        import_chapter_trees(data)


def test_unreadable_files_raise_engine_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(EngineError, match=r"not valid JSON \(line 1, column 2"):
        import_chapter_trees(bad)
    with pytest.raises(EngineError, match="not found"):
        import_chapter_trees(tmp_path / "missing.json")
    bad.write_text("[]", encoding="utf-8")
    with pytest.raises(EngineError, match="is a list, not an object"):
        import_chapter_trees(bad)


# --- the command -----------------------------------------------------------------------


def test_cli_json_is_the_export_and_nothing_else(kb_dir: Path, capsys) -> None:
    assert main(["tree", "--kb", str(kb_dir), "--json"]) == 0
    out = capsys.readouterr().out
    data = json.loads(out)
    assert data["statistics"]["totalChapters"] == 8
    assert import_chapter_trees(data).stats() == parse_kb(kb_dir).stats()


def test_cli_out_then_import(kb_dir: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "exports" / "chapter_trees.json"
    assert main(["tree", "--kb", str(kb_dir), "--out", str(out)]) == 0
    summary = capsys.readouterr().out
    assert "3 documents, 8 chapters, max depth 4, 1 problems" in summary
    assert "broken.md:3 code fence opened here is never closed" in summary
    assert "guide/setup#安装/linux~2" in summary
    assert list(out.parent.iterdir()) == [out]  # atomic write left no temp file
    assert main(["tree", "--import", str(out)]) == 0
    assert "3 documents, 8 chapters, max depth 4, 1 problems" in capsys.readouterr().out


def test_cli_bad_import_is_one_line_and_exit_2(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "chapter_trees.json"
    bad.write_text('{"version": "1.0", "documents": [{"docId": "a"}]}', encoding="utf-8")
    assert main(["tree", "--import", str(bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("wikirag: error: ") and "lacks 'filePath'" in captured.err


def test_cli_missing_kb_exit_2(tmp_path: Path, capsys) -> None:
    assert main(["tree", "--kb", str(tmp_path / "none")]) == 2
    assert "pass --kb DIR" in capsys.readouterr().err
