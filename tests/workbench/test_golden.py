import os
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.chapters import Document, KnowledgeBase, Node
from workbench.eval import golden as g
from workbench.eval import golden_drift

TEXT = """# Golden set for the demo (comment kept)
name: demo
queries:
  # an easy one
  - id: q001
    query: RAG 的切块策略有哪些？
    relevant: [rag/chunking#切块策略/按标题切分]   # the heading split
    difficulty: easy
    category: rag
  - id: q002
    query: What is RRF?
    relevant: [retrieval/hybrid#混合检索/rrf]
    difficulty: hard
    category: retrieval
  - id: q051
    query: 公司年会在哪里举办？
    unanswerable: true
"""


def _node(nid, doc, title, level, parent=None, children=(), fp=None, fm=None):
    return Node(
        node_id=nid,
        doc_id=doc,
        title=title,
        level=level,
        ordinal=0,
        parent_id=parent,
        children_ids=tuple(children),
        breadcrumb=(title,),
        line=1,
        anchor=title,
        content=title,
        summary="",
        file_path=fp or f"{doc}.md",
        frontmatter=fm or {},
    )


@pytest.fixture
def kb():
    docs = [
        Document(
            "rag/chunking",
            "rag/chunking.md",
            {},
            (
                _node(
                    "rag/chunking", "rag/chunking", "切块", 0, children=["rag/chunking#切块策略"]
                ),
                _node(
                    "rag/chunking#切块策略",
                    "rag/chunking",
                    "切块策略",
                    1,
                    "rag/chunking",
                    ["rag/chunking#切块策略/按标题切分-v2"],
                ),
                _node(
                    "rag/chunking#切块策略/按标题切分-v2",
                    "rag/chunking",
                    "按标题切分 v2",
                    2,
                    "rag/chunking#切块策略",
                ),
            ),
        ),
        Document(
            "README",
            "README.md",
            {"type": "domain-root"},
            (_node("README", "README", "Wiki", 0, fp="README.md", fm={"type": "domain-root"}),),
        ),
    ]
    return KnowledgeBase("x", tuple(docs))


def test_parse_and_defaults():
    gs = g.parse(TEXT)
    assert gs.name == "demo"
    assert [i.id for i in gs.items] == ["q001", "q002", "q051"]
    assert gs.items[2].unanswerable and gs.items[2].relevant == ()
    assert gs.items[0].language == "zh" and gs.items[1].language == "en"
    assert all(i.split == g.default_split(i.id) for i in gs.items)
    assert [i.id for i in gs.answerable()] == ["q001", "q002"]


def test_default_split_is_deterministic_and_near_quarter():
    ids = [f"q{n:04d}" for n in range(2000)]
    share = sum(g.default_split(i) == "holdout" for i in ids) / len(ids)
    assert 0.2 < share < 0.3
    assert [g.default_split(i) for i in ids] == [g.default_split(i) for i in ids]


def test_validate_errors(kb):
    gs = g.parse(
        TEXT
        + """  - id: q001
    query: ''
    relevant: [README]
    difficulty: extreme
"""
    )
    msgs = [str(i) for i in g.validate(gs, kb)]
    assert any("id used 2 times" in m for m in msgs)
    assert any("query is empty" in m for m in msgs)
    assert any("difficulty must be easy, medium or hard" in m for m in msgs)
    assert any("index/README node" in m for m in msgs)
    stale = [i for i in g.validate(gs, kb) if "unknown node id" in i.message]
    assert stale and stale[0].suggestions[0] == "rag/chunking#切块策略/按标题切分-v2"


def test_coverage_warnings():
    warns = [i.message for i in g.coverage_warnings(g.parse(TEXT))]
    assert any("only 2 answerable" in w for w in warns)
    assert any("category 'rag' has 1" in w for w in warns)


def test_coverage_warnings_render_through_the_ui_translator():
    from workbench.ui.i18n import catalog

    zh = catalog("zh")
    issue = g.coverage_warnings(g.parse(TEXT))[0]
    assert str(issue) == "[warning] only 2 answerable queries; aim for >= 30"  # the CLI's line
    assert issue.render(lambda s: zh.get(s, s)) == "[警告] 只有 2 条可回答的查询；目标至少 30 条"


def test_drift_and_remap(kb):
    gs = g.parse(TEXT)
    drift = golden_drift.drift_report(gs, kb)
    assert {d.item_id for d in drift} == {"q001", "q002"}
    d1 = next(d for d in drift if d.item_id == "q001")
    fixed = golden_drift.remap(gs, {d1.stale_id: d1.suggestions[0]})
    assert fixed.get("q001").relevant == ("rag/chunking#切块策略/按标题切分-v2",)


def test_save_keeps_comments_and_order(tmp_path):
    p = tmp_path / "demo.yaml"
    p.write_text(TEXT, encoding="utf-8")
    gs = g.load(p)
    new = g.item_from_dict(
        {
            "id": "q003",
            "query": "BM25 的 k1 是什么",
            "relevant": ["a#b"],
            "difficulty": "medium",
            "category": "retrieval",
        }
    )
    saved = g.save(g.with_item(gs, new))
    text = p.read_text(encoding="utf-8")
    assert "# Golden set for the demo (comment kept)" in text
    assert "# an easy one" in text and "# the heading split" in text
    assert text.index("q001") < text.index("q002") < text.index("q051") < text.index("q003")
    again = g.load(p)
    assert [i.id for i in again.items] == ["q001", "q002", "q051", "q003"]
    assert saved.sha256 == again.sha256


def test_save_detects_external_edit(tmp_path):
    p = tmp_path / "demo.yaml"
    p.write_text(TEXT, encoding="utf-8")
    gs = g.load(p)
    p.write_text(TEXT.replace("What is RRF?", "What is RRF fusion?"), encoding="utf-8")
    with pytest.raises(g.ConflictError):
        g.save(g.without_item(gs, "q002"))
    assert "What is RRF fusion?" in p.read_text(encoding="utf-8")  # nothing overwritten
    g.save(g.without_item(gs, "q002"), force=True)
    assert "q002" not in p.read_text(encoding="utf-8")


def test_crash_between_write_and_rename_loses_nothing(tmp_path, monkeypatch):
    p = tmp_path / "demo.yaml"
    p.write_text(TEXT, encoding="utf-8")
    gs = g.load(p)

    def boom(src, dst):
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        g.save(g.without_item(gs, "q001"))
    assert p.read_text(encoding="utf-8") == TEXT
    assert [x.name for x in tmp_path.iterdir()] == ["demo.yaml"]  # temp file cleaned up


def test_bad_yaml_is_clear_error(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("queries: [\n", encoding="utf-8")
    with pytest.raises(g.GoldenSetError, match="not valid YAML"):
        g.load(p)
    with pytest.raises(g.GoldenSetError, match="not found"):
        g.load(Path(tmp_path / "missing.yaml"))


def test_next_id():
    assert g.next_id(g.parse(TEXT)) == "q052"


def test_save_as_new_file_and_refuse_to_clobber_another(tmp_path):
    p = tmp_path / "demo.yaml"
    p.write_text(TEXT, encoding="utf-8")
    gs = g.load(p)
    copy = g.save(gs, tmp_path / "copy.yaml")
    assert g.load(tmp_path / "copy.yaml").items == gs.items and copy.path.name == "copy.yaml"
    other = tmp_path / "other.yaml"
    other.write_text("name: other\nqueries: []\n", encoding="utf-8")
    with pytest.raises(g.ConflictError, match="already exists"):
        g.save(gs, other)
    assert other.read_text(encoding="utf-8") == "name: other\nqueries: []\n"
    g.save(gs, other, force=True)
    assert [i.id for i in g.load(other).items] == ["q001", "q002", "q051"]


def test_hugo_section_page_chapters_are_valid_labels():
    hugo = SimpleNamespace(file_path="content/handbook/finance/_index.md", doc_type="")
    index = SimpleNamespace(file_path="src/api/index.md", doc_type="")
    readme = SimpleNamespace(file_path="docs/README.md", doc_type="")
    assert not g._is_index_node(hugo)
    assert g._is_index_node(index) and g._is_index_node(readme)


# Saving an unchanged golden set leaves the file byte for byte as it was.

ROUNDTRIP_TEXT = """name: demo
queries:
  - id: q001
    query: RAG 的切块策略有哪些？
    relevant: [rag/chunking#切块策略/按标题切分]
    category: rag
  - id: q051
    query: 公司年会在哪里举办？
    unanswerable: true
"""


def test_noop_save_adds_no_default_difficulty(tmp_path: Path) -> None:
    p = tmp_path / "demo.yaml"
    p.write_text(ROUNDTRIP_TEXT, encoding="utf-8")
    g.save(g.load(p))
    assert p.read_text(encoding="utf-8") == ROUNDTRIP_TEXT


def test_an_edited_difficulty_is_still_written(tmp_path: Path) -> None:
    p = tmp_path / "demo.yaml"
    p.write_text(ROUNDTRIP_TEXT, encoding="utf-8")
    gs = g.load(p)
    item = replace(gs.get("q001"), difficulty="hard")
    g.save(g.with_item(gs, item))
    assert g.load(p).get("q001").difficulty == "hard"
    assert "difficulty" not in p.read_text(encoding="utf-8").split("q051")[1]
