"""Input caps shared by every surface: the HTTP API, MCP over stdio and HTTP, the chat.

Defined once so a query refused by ``POST /search`` is refused by the MCP tools too, with
the same number in the message.
"""

from __future__ import annotations

# A question longer than this is not a question: a 5 MB query kept a core busy ~150 s in
# jieba + BM25 before it was capped.
MAX_QUERY_CHARS = 4000
# Request bodies (HTTP API and MCP over HTTP). The largest legitimate body is an /ask with
# history: 4,000-char question + a few turns, far below this.
MAX_BODY_BYTES = 1024 * 1024


def query_problem(text: str, what: str = "query") -> str | None:
    """Why ``text`` cannot be searched (empty, too long), or None when it can."""
    if not text.strip():
        return f"{what} must not be empty"
    if len(text) > MAX_QUERY_CHARS:
        return (
            f"{what} is {len(text):,} characters; the limit is {MAX_QUERY_CHARS:,}: "
            "shorten it to the question itself"
        )
    return None
