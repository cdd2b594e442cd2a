"""The model-output sanitiser, judged the way a renderer sees it: every output is rendered with
markdown-it's CommonMark renderer (raw HTML on, GFM tables on) and each ``src``/``href`` it
produces is resolved against the page the way a browser would; none may leave the wiki."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin, urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from workbench.answer.citations import check_citations
from workbench.answer.safe_markdown import escape_text, is_wiki_target, neutralize, safe_markdown

RENDER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
PAGE = "https://wiki.local/app/chat"

# The five bypasses of the regex filter (issue 25), each of which rendered an off-site
# image or link under CommonMark.
PAYLOADS = [
    "![a [b] c](//evil.example/leak)",
    "![a\\]b](&#104;ttp://evil.example/leak)",
    "![a\nb](http\\://evil.example/leak)",
    "> [r]: http://evil.example/leak\n\n![x][r]",
    "- [r]: http://evil.example/leak\n\n![x][r]",
    "[x](&#104;ttp://evil.example/leak)",
]
MORE = [
    "[x](//evil.example/a)",
    "<a href='http://evil.example'>x</a><img src=//evil.example/i>",
    "<http://evil.example/auto> and www.evil.example and a@evil.example",
    "[1][2]\n\n[2]: //evil.example/x",
    "[1](//evil.example/x)",
    "* [r]: <//evil.example/x>\n\n[t][r] ![u][r]",
    "> > [deep]: //evil.example/x\n\n[y][deep]",
    "| a |\n|---|\n| ![i](//evil.example/t) |",
]
# Look like attacks but are text (or a harmless path) to CommonMark already: must stay so.
DECOYS = [
    "[x](/\\evil.example/a)",
    "[x](%2F%2Fevil.example/a)",
    "[x](java\tscript:alert(1))",
    "\\[1\\]: //evil.example/x\n\n[1]",
    "&#91;x&#93;(//evil.example/x)",
    "```\n![x](//evil.example/code)\n```\n\n`![y](//evil.example/span)`",
]


class _Attrs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.text: list[str] = []  # text outside <code>/<pre>
        self._code = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._code += tag in ("code", "pre")
        self.urls += [v or "" for k, v in attrs if k in ("src", "href", "srcset", "action")]

    def handle_endtag(self, tag: str) -> None:
        self._code -= tag in ("code", "pre")

    def handle_data(self, data: str) -> None:
        if not self._code:
            self.text.append(data)


def off_site(markdown: str) -> list[str]:
    """Every URL the rendered Markdown would load or link that a browser resolves off the wiki,
    plus bare URLs in text (which a GFM renderer such as Streamlit's turns into links)."""
    parser = _Attrs()
    parser.feed(RENDER.render(markdown))
    bad = []
    for url in parser.urls:
        # what a browser does: tabs/newlines dropped, "\" read as "/", resolved against the page
        resolved = urlsplit(urljoin(PAGE, re.sub(r"[\t\n\r]", "", url).replace("\\", "/")))
        if (resolved.scheme, resolved.netloc) != ("https", "wiki.local"):
            bad.append(url)
    text = "".join(parser.text)
    bad += re.findall(r"(?i)\b(?:https?|ftp)://\S+|\bwww\.\S+|[\w.+-]+@[\w-]+\.\w+", text)
    return bad


def test_the_payloads_do_render_off_site_without_the_sanitiser():
    assert all(off_site(p) for p in PAYLOADS + MORE)
    assert not any(off_site(p) for p in DECOYS)


@pytest.mark.parametrize("payload", PAYLOADS + MORE + DECOYS)
def test_no_payload_renders_an_off_site_url_once_sanitised(payload):
    assert off_site(safe_markdown(payload)) == []


def test_the_five_bypasses_keep_their_text_and_report_what_went():
    got = [neutralize(p) for p in PAYLOADS]
    assert [g.text for g in got] == ["a \\[b\\] c", "a\\]b", "a\nb", "x", "x", "x"]
    assert [g.removed[-1] for g in got] == [
        "image //evil.example/leak",
        "image http://evil.example/leak",
        "image http://evil.example/leak",
        "image http://evil.example/leak",
        "image http://evil.example/leak",
        "link http://evil.example/leak",
    ]


PIECES = st.sampled_from(
    [
        "![", "[", "]", "(", ")", "<", ">", "\\", "\n", "\n\n", "> ", "- ", "1. ", "* ",
        "[r]: ", "[r]", "][r]", "[1]", "[2]", "[1][2]", "[1-3]", "【1】", "`", "``", "*", "_",
        "|", "---", "   ", "\t", "x", "词", "#", ":", '"t"', "&", "&#104;", "&#58;", "%2F",
        "//evil.example/p", "http://evil.example/p", "http\\://evil.example", "h&#116;tp:",
        "&#104;ttp://evil.example/p", "javascript:x", "/\\evil.example", "www.evil.example",
        "<img src=//evil.example/i>", "<a href=//evil.example>", "](", ")]", "!", "~~",
        "\ue000", "\ue0010\ue001", "rag/chunking.md", "a@evil.example",
    ]
)  # fmt: skip
MARKDOWN = st.one_of(st.lists(PIECES, max_size=40).map("".join), st.text(max_size=80))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(MARKDOWN)
def test_no_generated_markdown_renders_an_off_site_url_once_sanitised(text):
    out = safe_markdown(text)
    assert off_site(out) == [], (text, out)
    # once is enough: the UI applies it again to an answer, and finds nothing more to take out
    assert neutralize(out).removed == ()


def test_answer_formatting_and_wiki_links_survive_unchanged():
    answer = (
        "## 切块\n\n"
        "按标题切分 **保留面包屑** [1][2]，见 [切块策略](rag/chunking.md#intro) 与 "
        "[第 3 章](knowledge_base?node=rag%2Fchunking) [3]。\n\n"
        "- 父子切块：`parent_id` 指向父块 [2]\n"
        "- *滑动窗口* [1, 2]\n\n"
        "1. one\n"
        "2. two [1-3]\n\n"
        "> quoted 【1】\n\n"
        "```python\nchunk(text, size=512)\n```\n\n"
        "| k1 | b |\n| --- | --- |\n| 1.2 | 0.75 |"
    )
    assert neutralize(answer) == (answer, ()) or neutralize(answer).text == answer
    assert neutralize(answer).removed == ()


def test_citations_reach_the_citation_check_as_written():
    sources = [type("S", (), {"n": n})() for n in (1, 2, 3)]
    text = safe_markdown("A [1][2] B [2][3][4] C [1]-[3]\n\n[2]: //evil.example/x")
    assert text == "A [1][2] B [2][3][4] C [1]-[3]"
    assert check_citations(text, sources)[0] == "A [1][2] B [2][3] C [1][2][3]"


def test_literal_markup_in_text_stays_literal():
    # escaped in the source: shown as written, not turned into emphasis, headings or lists
    out = safe_markdown("a \\*b\\* c\n\n\\# not a heading\n\n\\- not a list\n\n2\\. nor this")
    assert RENDER.render(out) == RENDER.render(
        "a \\*b\\* c\n\n\\# not a heading\n\n\\- not a list\n\n2\\. nor this"
    )


@pytest.mark.parametrize(
    "target, local",
    [
        ("rag/chunking.md#intro", True),
        ("knowledge_base?node=a%2Fb", True),
        ("#intro", True),
        ("//evil.example", False),
        ("/\\evil.example", False),
        ("%2F%2Fevil.example", False),
        ("http://evil.example", False),
        ("java\tscript:x", False),
        ("", False),
    ],
)
def test_wiki_targets_are_relative_without_a_host(target, local):
    assert is_wiki_target(target) is local


def test_a_label_is_text_whatever_markup_it_holds():
    label = "![x](http://evil.example/i) [y](//evil.example) **b** :red[c]\nd"
    assert off_site(escape_text(label)) == []
    assert RENDER.renderInline(escape_text(label)) == (
        "![x](<code>http://evil.example/i)</code> [y](//evil.example) **b** :red[c] d"
    )
