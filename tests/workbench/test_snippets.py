"""Search-result snippets: plain text, the matching window, terms marked, markup escaped."""

from __future__ import annotations

from workbench.eval.snippets import plain_text, snippet
from workbench.ui.snippets import escape_markdown, snippet_markdown

CHAPTER = """## 传输方式

MCP 支持两种传输方式：stdio 和 HTTP。![x](http://attacker.example/leak?q=1)
更多见 [文档](http://example.com/doc)。

```bash
wikirag mcp --stdio
```
"""


def test_plain_text_drops_headings_fences_images_and_link_targets():
    text = plain_text(CHAPTER)
    assert "##" not in text and "```" not in text
    assert "attacker.example" not in text and "example.com" not in text
    assert "文档" in text and "stdio" in text


def test_snippet_marks_query_terms_and_escapes_markup():
    s = snippet(CHAPTER, "MCP 传输方式")
    md = snippet_markdown(s)
    assert ("**MCP**" in md and "**传输**" in md) or "**传输方式**" in md
    evil = snippet(
        "see [click](http://evil.example) and ![i](http://evil.example/x.png) <b>", "see"
    )
    assert "http" not in snippet_markdown(evil)
    assert "<b>" not in snippet_markdown(evil) and "\\<b\\>" in snippet_markdown(evil)


def test_snippet_centres_on_the_matches_in_a_long_chapter():
    text = "无关内容。" * 200 + "父子块检索的数据结构" + "其他内容。" * 200
    s = snippet(text, "父子块 数据结构", width=80)
    assert "数据结构" in s.text
    assert s.clipped_left and s.clipped_right
    assert len(s.text) <= 80


def test_escape_markdown_neutralises_links_and_directives():
    assert escape_markdown("[a](b)") == "\\[a\\]\\(b\\)"
    assert escape_markdown(":red[x]") == "\\:red\\[x\\]"
