"""Chapter-tree parser: CommonMark agreement, stable ids, anchors, no text lost, bad input."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.chapters import Document
from engine.errors import EngineError
from engine.front_matter import decode_markdown, split_front_matter
from engine.markdown_scan import document_headings, slugify
from engine.tree import parse_document, parse_kb


def body_of(doc: Document) -> str:
    return "".join(n.content for n in doc.nodes)


def ids(doc: Document) -> list[str]:
    return [n.node_id for n in doc.nodes]


def by_title(doc: Document, title: str):
    return next(n for n in doc.nodes if n.title == title)


def whats(doc: Document) -> list[str]:
    return [p.what for p in doc.problems]


# --- agreement with a CommonMark parser on real, messy files -----------------------------


def messy_files(shared: Path) -> list[Path]:
    return sorted((shared / "messy-md").glob("*.md"))


def test_headings_match_commonmark_reference(shared_data: Path) -> None:
    reference = json.loads((shared_data / "messy-md" / "commonmark_headings.json").read_text())
    files = messy_files(shared_data)
    assert {f.name for f in files} == set(reference)
    for path in files:
        got = [
            {"level": h.level, "text": h.text, "line": h.line, "setext": h.setext}
            for h in document_headings(path.read_bytes())
        ]
        # The zola configuration file has TOML (+++) front matter, which the reference's
        # front-matter plugin does not know; CommonMark reads it as a paragraph with no
        # heading in it, so both lists agree on that file too (checked, not excepted).
        assert got == reference[path.name], path.name


def test_tree_nodes_follow_the_headings(shared_data: Path) -> None:
    for path in messy_files(shared_data):
        data = path.read_bytes()
        doc = parse_document(data, path.name)
        heads = document_headings(data)
        assert [(n.level, n.line) for n in doc.nodes[1:]] == [(h.level, h.line) for h in heads]
        assert [n.title for n in doc.nodes[1:]] == [h.title for h in heads]
        text, _ = decode_markdown(data)
        assert text is not None
        assert body_of(doc) == split_front_matter(text)[1], path.name
        assert len(set(ids(doc))) == len(doc.nodes), path.name
        anchors = [n.anchor for n in doc.nodes[1:]]
        assert len(set(anchors)) == len(anchors), path.name


def test_messy_file_specifics(shared_data: Path) -> None:
    d = shared_data / "messy-md"
    unclosed = parse_document(
        (
            d
            / "UKPLab__sentence-transformers__docs__package_reference__sparse_encoder__evaluation.md"
        ).read_bytes(),
        "eval.md",
    )
    assert [(p.line, p.todo) for p in unclosed.problems] == [(55, "close the fence with ```")]

    hello = parse_document(
        (d / "getzola__zola__test_site__content__hello.md").read_bytes(), "hello.md"
    )
    assert hello.nodes[0].content == "\nThis file starts with a UTF-8 BOM and should be loaded\n"
    assert hello.nodes[0].line == 3
    assert hello.problems == ()

    api = parse_document(
        (d / "pingcap__docs-cn__dm__dm-open-api.md").read_bytes(), "dm-open-api.md"
    )
    uri = [n for n in api.nodes if n.title == "请求 URI"]
    assert len(uri) == 32
    # each sits under a different H2, so no "~N" is needed; anchors count up GitHub-style
    assert all("~" not in n.node_id for n in uri)
    assert [n.anchor for n in uri[:3]] == ["请求-uri", "请求-uri-1", "请求-uri-2"]

    glossary = parse_document(
        (d / "vuejs-translations__docs-zh-cn__src__glossary__index.md").read_bytes(), "glossary.md"
    )
    top = glossary.nodes[1]
    assert (top.title, top.anchor, top.node_id) == ("术语表", "glossary", "glossary#术语表")


def test_cjk_anchor_links_resolve(shared_data: Path) -> None:
    """Every in-page link of pingcap's system-variables.md points at an anchor we produce."""
    text = (shared_data / "messy-md" / "pingcap__docs-cn__system-variables.md").read_text("utf-8")
    doc = parse_document(text, "system-variables.md")
    links = set(re.findall(r"\]\(#([^)\s]+)\)", text))
    assert len(links) > 30
    assert links <= {n.anchor for n in doc.nodes}


def test_whole_pingcap_corpus_parses(shared_data: Path) -> None:
    root = shared_data / "corpora" / "pingcap-docs-cn"
    seen: list[tuple[int, int]] = []
    kb = parse_kb(root, progress=lambda done, total: seen.append((done, total)))
    stats = kb.stats()
    assert stats["totalDocuments"] == 1222
    assert stats["totalChapters"] > 10_000
    assert 3 <= stats["maxDepth"] <= 6
    assert seen[-1] == (1222, 1222)
    assert len(kb.nodes) == stats["totalDocuments"] + stats["totalChapters"]
    assert [d.file_path for d in kb.documents] == sorted(d.file_path for d in kb.documents)


# --- rules, one hand-written case each -----------------------------------------------------


def test_setext_headings() -> None:
    doc = parse_document("Title\n=====\n\ntext\n\nPart\n---\nmore\n", "s.md")
    assert [(n.level, n.title, n.line) for n in doc.nodes] == [
        (0, "Title", 1),
        (1, "Title", 1),
        (2, "Part", 6),
    ]
    assert doc.nodes[2].content == "Part\n---\nmore\n"


def test_hash_lines_in_fences_html_and_quoted_fences_are_not_headings() -> None:
    md = (
        "# Real\n\n"
        "```sh\n# comment\n```\n\n"
        "~~~\n## also code\n~~~\n\n"
        "<div>\n# inside html\n</div>\n\n"
        "> ```shell\n> # quoted fence\n> ```\n\n"
        "    # indented code\n\n"
        "## Second\n"
    )
    doc = parse_document(md, "f.md")
    assert [n.title for n in doc.nodes[1:]] == ["Real", "Second"]
    assert doc.problems == ()


def test_headings_in_list_items_and_blockquotes_are_headings() -> None:
    doc = parse_document("# A\n\n- item\n\n  ### Inside {#inside}\n\n> ## Quoted\n", "l.md")
    assert [(n.level, n.title, n.anchor, n.line) for n in doc.nodes[1:]] == [
        (1, "A", "a", 1),
        (3, "Inside", "inside", 5),
        (2, "Quoted", "quoted", 7),
    ]
    assert doc.nodes[2].content == "  ### Inside {#inside}\n\n"


def test_unclosed_fence_runs_to_eof_with_a_warning() -> None:
    doc = parse_document("---\ntitle: x\n---\n# A\n\n```python\n# not a heading\n", "u.md")
    assert [n.title for n in doc.nodes[1:]] == ["A"]
    assert [(p.line, p.what, p.todo) for p in doc.problems] == [
        (
            6,
            "code fence opened here is never closed; everything after it is treated as code",
            "close the fence with ```",
        )
    ]
    closed = parse_document("# A\n\n````\n```\n````\n", "c.md")
    assert closed.problems == ()


def test_custom_id_sets_anchor_and_is_stripped_from_title() -> None:
    doc = parse_document("# 全局 API：常规 {#global-api}\n\n## `ref()` {#ref}\n", "c.md")
    assert [(n.title, n.anchor) for n in doc.nodes[1:]] == [
        ("全局 API：常规", "global-api"),
        ("ref()", "ref"),
    ]
    assert doc.nodes[1].node_id == "c#全局-api常规"
    assert doc.nodes[0].title == "全局 API：常规"


def test_duplicate_custom_ids_are_reported_and_kept_unique() -> None:
    doc = parse_document("# A {#x}\n\n## B {#x}\n", "d.md")
    assert [n.anchor for n in doc.nodes[1:]] == ["x", "x-1"]
    assert [(p.line, p.what) for p in doc.problems] == [
        (3, "anchor {#x} is already used by the heading on line 1")
    ]


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Hello, World!", "hello-world"),
        ("TiDB 是否支持二级键？", "tidb-是否支持二级键"),
        (
            "`tidb_mem_quota_query` 从 v4.0.3 版本开始引入",
            "tidb_mem_quota_query-从-v403-版本开始引入",
        ),
        ("A -- B", "a----b"),
        ("C++ & C#", "c--c"),
        ("🎉", ""),
    ],
)
def test_slugify_is_githubs(title: str, slug: str) -> None:
    assert slugify(title) == slug


def test_anchors_unique_in_document_github_scheme() -> None:
    doc = parse_document("# 示例\n\n## 示例\n\n## 示例-1\n\n### 示例\n", "a.md")
    assert [n.anchor for n in doc.nodes[1:]] == ["示例", "示例-1", "示例-1-1", "示例-2"]


def test_title_is_plain_text() -> None:
    doc = parse_document(
        '## `var` <span class="v">从 v7 开始</span> [link](http://x) *em* &amp;\n', "t.md"
    )
    assert doc.nodes[1].title == "var 从 v7 开始 link em &"


def test_level_skip_parent_is_nearest_lower_level() -> None:
    doc = parse_document("# A\n\n### C\n\n## B\n\n#### D\n\n# E\n", "k.md")
    parents = {n.title: n.parent_id for n in doc.nodes[1:]}
    assert parents == {"A": "k", "C": "k#a", "B": "k#a", "D": "k#a/b", "E": "k"}
    assert ids(doc) == ["k", "k#a", "k#a/c", "k#a/b", "k#a/b/d", "k#e"]
    assert doc.nodes[0].children_ids == ("k#a", "k#e")
    assert doc.nodes[1].children_ids == ("k#a/c", "k#a/b")
    assert [n.ordinal for n in doc.nodes] == [0, 1, 2, 3, 4, 5]


def test_no_h1_uses_frontmatter_title_then_file_stem() -> None:
    with_fm = parse_document("---\ntitle: Travel\n---\n\nintro\n\n## 1. Policy\n", "hb/travel.md")
    assert with_fm.nodes[0].title == "Travel"
    assert with_fm.nodes[1].breadcrumb == ("Travel", "1. Policy")
    assert with_fm.nodes[1].node_id == "hb/travel#1-policy"
    no_fm = parse_document("## Only H2\n", "dir/page.md")
    assert no_fm.nodes[0].title == "page"
    assert no_fm.nodes[1].breadcrumb == ("page", "Only H2")


def test_no_headings_is_one_document_node() -> None:
    doc = parse_document("just text\nover two lines\n", "plain.md")
    assert len(doc.nodes) == 1
    head = doc.nodes[0]
    assert (head.node_id, head.level, head.title, head.line) == ("plain", 0, "plain", 1)
    assert head.content == "just text\nover two lines\n"
    assert head.summary == "just text over two lines"
    assert head.parent_id is None and head.children_ids == ()


def test_breadcrumbs_do_not_repeat_the_document_title() -> None:
    doc = parse_document("# Guide\n\n## Setup\n\n### Linux\n", "g.md")
    assert [n.breadcrumb for n in doc.nodes] == [
        ("Guide",),
        ("Guide",),
        ("Guide", "Setup"),
        ("Guide", "Setup", "Linux"),
    ]
    other = parse_document("---\ntitle: Handbook\n---\n# Guide\n\n## Setup\n", "h.md")
    assert [n.breadcrumb for n in other.nodes] == [
        ("Handbook",),
        ("Handbook", "Guide"),
        ("Handbook", "Guide", "Setup"),
    ]


def test_duplicate_sibling_titles_get_tilde_ordinals() -> None:
    md = "# R\n\n## Bug fixes\n\n## New\n\n## Bug fixes\n\n## Bug Fixes!\n\n# S\n\n## Bug fixes\n"
    doc = parse_document(md, "log.md")
    assert ids(doc)[1:] == [
        "log#r",
        "log#r/bug-fixes",
        "log#r/new",
        "log#r/bug-fixes~2",
        "log#r/bug-fixes~3",
        "log#s",
        "log#s/bug-fixes",
    ]


def test_ids_do_not_depend_on_earlier_unrelated_headings() -> None:
    a = parse_document("# A\n\n## Usage\n\n# B\n\n## Usage\n", "x.md")
    b = parse_document("# B\n\n## Usage\n", "x.md")
    assert ids(a)[-1] == ids(b)[-1] == "x#b/usage"


def test_renaming_a_heading_changes_its_and_its_descendants_ids_only() -> None:
    a = parse_document("# A\n\n## B\n\n### C\n\n## D\n", "r.md")
    b = parse_document("# A\n\n## B2\n\n### C\n\n## D\n", "r.md")
    assert ids(a) == ["r", "r#a", "r#a/b", "r#a/b/c", "r#a/d"]
    assert ids(b) == ["r", "r#a", "r#a/b2", "r#a/b2/c", "r#a/d"]


def test_node_fields() -> None:
    md = "---\nkeywords: a, b\npriority: P0\n---\n# T\n\nFirst **bold** line with `code`.\n\n```\nx\n```\n"
    doc = parse_document(md, "sub/n.md")
    node = doc.nodes[1]
    assert node.line == 5
    assert node.content == "# T\n\nFirst **bold** line with `code`.\n\n```\nx\n```\n"
    assert node.summary == "First bold line with code."
    assert node.keywords == ["a", "b"] and node.priority == "P0"
    assert node.frontmatter == {"keywords": "a, b", "priority": "P0"}
    assert node.file_path == "sub/n.md" and node.doc_id == "sub/n"
    assert node.content_hash == hashlib.sha256(node.content.encode()).hexdigest()[:16]
    long = parse_document("# T\n\n" + "word " * 100 + "\n", "l.md").nodes[1].summary
    assert long.endswith("…") and len(long) <= 121


def test_document_node_summary_prefers_frontmatter_summary() -> None:
    doc = parse_document("---\nsummary: 本文介绍外键。\n---\n# 外键\n", "fk.md")
    assert doc.nodes[0].summary == "本文介绍外键。"


def test_yaml_and_toml_front_matter() -> None:
    yaml_doc = parse_document(
        "---\ntitle: Y\ndate: 2024-01-02\nkeywords: [x, y]\n---\n# H\n", "y.md"
    )
    assert yaml_doc.frontmatter == {"title": "Y", "date": "2024-01-02", "keywords": ["x", "y"]}
    assert yaml_doc.nodes[1].line == 6
    toml_doc = parse_document(
        '+++\ntitle = "Configuration"\nweight = 40\n+++\n\n## Slugs\n', "t.md"
    )
    assert toml_doc.frontmatter == {"title": "Configuration", "weight": 40}
    assert toml_doc.nodes[0].title == "Configuration"
    assert toml_doc.nodes[1].line == 6
    assert toml_doc.nodes[0].content == "\n"


def test_unclosed_front_matter_is_body() -> None:
    fm, body, lines, problems = split_front_matter("---\nnot closed\n")
    assert (fm, body, lines, problems) == ({}, "---\nnot closed\n", 0, [])


def test_bom_and_crlf() -> None:
    raw = "\ufeff---\r\ntitle: B\r\n---\r\n# H\r\n\r\ntext\rmore\n".encode()
    doc = parse_document(raw, "b.md")
    assert doc.frontmatter == {"title": "B"}
    assert doc.nodes[1].content == "# H\n\ntext\nmore\n"
    assert doc.nodes[1].line == 4
    assert doc.problems == ()


def test_non_utf8_is_replaced_and_reported() -> None:
    doc = parse_document(b"# Caf\xe9\n\ntext\n\n## Two\n", "latin.md")
    assert [n.title for n in doc.nodes[1:]] == ["Caf\ufffd", "Two"]
    assert [(p.line, p.severity) for p in doc.problems] == [(1, "warning")]
    assert "not valid UTF-8" in doc.problems[0].what


def test_binary_file_is_skipped_with_an_error(tmp_path: Path) -> None:
    (tmp_path / "ok.md").write_text("# Fine\n")
    (tmp_path / "bin.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    kb = parse_kb(tmp_path)
    assert [d.file_path for d in kb.documents] == ["ok.md"]
    assert [(p.file_path, p.severity) for p in kb.problems] == [("bin.md", "error")]


def test_malformed_yaml_keeps_body_and_reports_line() -> None:
    doc = parse_document("---\ntitle: ok\nbad: [unclosed\nx: y\n---\n# Body\n", "m.md")
    assert doc.frontmatter == {}
    assert [n.title for n in doc.nodes[1:]] == ["Body"]
    assert doc.nodes[1].line == 6
    (problem,) = doc.problems
    assert problem.line in (3, 4, 5)  # PyYAML reports where it gave up, inside the block
    assert "not valid YAML" in problem.what


def test_frontmatter_that_is_not_a_mapping() -> None:
    doc = parse_document("---\n- a\n- b\n---\ntext\n", "l.md")
    assert doc.frontmatter == {}
    assert doc.nodes[0].content == "text\n"
    assert [p.what for p in doc.problems] == [
        "front matter is a list, not a mapping of keys to values; it is ignored"
    ]


def test_empty_file_warns() -> None:
    doc = parse_document(b"", "e.md")
    assert len(doc.nodes) == 1 and doc.nodes[0].content == ""
    assert doc.nodes[0].title == "e"
    assert [(p.line, p.what) for p in doc.problems] == [(0, "file has no content")]


def test_one_megabyte_file() -> None:
    section = "## Part\n\n" + ("Lorem ipsum dolor sit amet. " * 40 + "\n\n") * 10
    md = "# Big\n\n" + section * 100
    assert len(md.encode()) > 1_000_000
    doc = parse_document(md, "big.md")
    assert len(doc.nodes) == 102
    assert doc.nodes[-1].node_id == "big#big/part~100"
    assert body_of(doc) == md


def test_kb_walk_sorted_skips_hidden(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.md").write_text("# hidden\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.md").write_text("# Z\n")
    (tmp_path / "a.md").write_text("# A\n")
    (tmp_path / "notes.txt").write_text("# not markdown\n")
    kb = parse_kb(str(tmp_path))
    assert [d.doc_id for d in kb.documents] == ["a", "b/z"]
    assert kb.get("b/z#z") is not None and kb.parent("b/z#z") is kb.get("b/z")


def test_missing_kb_folder_is_an_engine_error(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="pass --kb DIR"):
        parse_kb(tmp_path / "nope")


# --- properties ------------------------------------------------------------------------

_words = st.text(alphabet=st.sampled_from(list("abc xyz中文？!`*_-#>=~")), min_size=0, max_size=20)
_block = st.one_of(
    st.builds(lambda n, t: "#" * n + " " + t, st.integers(1, 7), _words),
    st.builds(lambda t: t + "\n" + "=" * 3, _words),
    st.builds(lambda t: t + "\n---", _words),
    st.builds(lambda f, t: f + "\n" + t + "\n" + f, st.sampled_from(["```", "~~~"]), _words),
    st.builds(lambda t: "```\n# " + t, _words),  # unclosed
    st.builds(lambda t: "> " + t, _words),
    st.builds(lambda t: "- " + t + "\n  ## " + t, _words),
    st.builds(lambda t: "<div>\n# " + t + "\n</div>", _words),
    _words,
)


@st.composite
def markdown(draw: st.DrawFn) -> str:
    blocks = draw(st.lists(_block, max_size=12))
    seps = draw(
        st.lists(
            st.sampled_from(["\n", "\n\n", "\r\n", "\r\n\r\n", "\r"]),
            min_size=len(blocks),
            max_size=len(blocks),
        )
    )
    text = "".join(b + s for b, s in zip(blocks, seps, strict=True))
    if draw(st.booleans()):
        text = "---\ntitle: t\n---\n" + text
    if draw(st.booleans()):
        text = "\ufeff" + text
    return text


@settings(max_examples=150, deadline=None)
@given(markdown())
def test_no_text_is_lost(md: str) -> None:
    doc = parse_document(md, "p.md")
    text, _ = decode_markdown(md.encode())
    assert text is not None
    assert body_of(doc) == split_front_matter(text)[1]
    assert len(set(ids(doc))) == len(doc.nodes)
    assert [n.ordinal for n in doc.nodes] == list(range(len(doc.nodes)))


_filler = st.text(alphabet=st.sampled_from(list("abc 中文,.")), min_size=1, max_size=40).filter(
    lambda s: s.strip() != ""
)


@settings(max_examples=100, deadline=None)
@given(
    titles=st.lists(
        st.sampled_from(["Intro", "Usage", "FAQ", "用法", "示例"]), min_size=1, max_size=8
    ),
    levels=st.lists(st.integers(1, 4), min_size=8, max_size=8),
    where=st.integers(0, 7),
    filler=_filler,
)
def test_ids_stable_under_edits_inside_a_chapter(
    titles: list[str], levels: list[int], where: int, filler: str
) -> None:
    chapters = [
        f"{'#' * lvl} {t}\n\nbody of {t}\n\n" for t, lvl in zip(titles, levels, strict=False)
    ]
    before = parse_document("".join(chapters), "s.md")
    k = where % len(chapters)
    edited = [*chapters]
    edited[k] = edited[k] + filler + "\n\n"
    after = parse_document("".join(edited), "s.md")
    assert ids(after) == ids(before)
    assert [n.anchor for n in after.nodes] == [n.anchor for n in before.nodes]
    changed = [
        a.node_id
        for a, b in zip(after.nodes, before.nodes, strict=True)
        if a.content_hash != b.content_hash
    ]
    assert changed == [before.nodes[k + 1].node_id]


# Front matter with scalar values where lists are expected must not crash indexing.


def test_scalar_keywords_are_one_keyword() -> None:
    doc = parse_document("---\nkeywords: 12\n---\n# T\n\nbody\n", "k.md")
    assert doc.nodes[1].keywords == ["12"]


def test_boolean_and_null_keywords() -> None:
    assert parse_document("---\nkeywords: true\n---\n# T\n", "b.md").nodes[1].keywords == ["True"]
    assert parse_document("---\nkeywords:\n---\n# T\n", "n.md").nodes[1].keywords == []


def test_front_matter_aliases_are_refused_not_expanded() -> None:
    # "billion laughs": 9 levels of 9 references each would build 9**9 strings in safe_load
    lines = ["---", 'a0: &a0 "lol"']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    text = "\n".join([*lines, "title: Bomb", "---", "# Body", "text"]) + "\n"
    doc = parse_document(text, "bomb.md")
    assert doc.frontmatter == {}  # ignored whole: nothing of it was expanded
    assert [n.title for n in doc.nodes[1:]] == ["Body"]
    (problem,) = doc.problems
    assert (problem.line, problem.what) == (
        3,
        "front matter uses a YAML alias (*a0), which is not allowed; it is ignored",
    )


def test_front_matter_anchor_without_alias_still_loads() -> None:
    doc = parse_document("---\ntitle: &t Kept\n---\n# Body\n", "anchor.md")
    assert doc.frontmatter == {"title": "Kept"} and not doc.problems
