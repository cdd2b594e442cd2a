"""Snippets rendered for the UI: the pure snippet (workbench.eval.snippets) as escaped
Markdown with the query's terms marked (wiki text is untrusted)."""

from __future__ import annotations

from workbench.answer.safe_markdown import escape_text
from workbench.eval.snippets import Snippet

# Characters Markdown (and Streamlit's :color[...] directives) give meaning to, escaped: one
# rule for snippets, labels and titles (bare URLs become code, which GFM does not link).
escape_markdown = escape_text


def snippet_markdown(s: Snippet, mark: str = "**") -> str:
    """Escaped Markdown with the terms wrapped in ``mark``."""
    body = "".join(
        f"{mark}{escape_markdown(t)}{mark}" if hit and t.strip() else escape_markdown(t)
        for t, hit in s.parts
    )
    return ("… " if s.clipped_left else "") + body + (" …" if s.clipped_right else "")


__all__ = [
    "escape_markdown",
    "snippet_markdown",
]
