"""Optional LLM summaries of chapters, cached by content hash for the next index build.

The cache is one JSON file (``<index dir>/summaries.json``)::

    {"version": 1,
     "summaries": {"<content_hash>": {"summary": "...", "node_id": "...", "model": "..."}}}

Keyed by the chapter's content hash, so an edited chapter gets a fresh summary, an
unchanged one is never paid for twice, and a moved chapter keeps its summary. The file is
rewritten atomically after every few new summaries, so an interrupted run resumes where it
stopped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from engine.chapters import KnowledgeBase, Node
from engine.errors import EngineError
from workbench.answer.llm import NO_LLM_HINT, LLMClient

CACHE_VERSION = 1
SAVE_EVERY = 10  # new summaries between atomic saves
CONTENT_CHARS = 3000  # chapter text sent to the model
MAX_SUMMARY_CHARS = 400
MIN_BODY_CHARS = 20  # a chapter with less text than this (beyond its heading) is skipped

_SYSTEM = (
    "Task: summarize\n"
    "You summarise one chapter of a team's Markdown wiki in 1-2 sentences, in the "
    "chapter's own language, for a search index. Reply with the summary only."
)


def content_hash(node: Node) -> str:
    """The node's content hash, or one computed the way engine.tree does if it is empty."""
    return node.content_hash or hashlib.sha256(node.content.encode("utf-8")).hexdigest()[:16]


def _body(node: Node) -> str:
    lines = node.content.splitlines()
    if lines and lines[0].lstrip().startswith("#"):
        lines = lines[1:]
    return "\n".join(lines).strip()


def _read_cache(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise EngineError(
            f"summary cache {path} is not valid JSON ({exc}); delete it to start over"
        ) from exc
    entries = data.get("summaries") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise EngineError(f"summary cache {path} has no 'summaries' mapping; delete it to rebuild")
    return {
        str(k): v
        for k, v in entries.items()
        if isinstance(v, dict) and isinstance(v.get("summary"), str)
    }


def _write_cache(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    body = {"version": CACHE_VERSION, "summaries": dict(sorted(entries.items()))}
    atomic_write_text(path, json.dumps(body, ensure_ascii=False, indent=1) + "\n")


def load_summaries(cache_path: str | Path) -> dict[str, str]:
    """content_hash -> summary from the cache file ({} when there is none yet)."""
    return {h: e["summary"] for h, e in _read_cache(Path(cache_path)).items()}


def _clean(text: str) -> str:
    text = " ".join(text.split()).strip().strip("\"'“”")
    if len(text) > MAX_SUMMARY_CHARS:
        text = text[:MAX_SUMMARY_CHARS].rstrip() + "…"
    return text


def summarize_kb(
    kb: KnowledgeBase,
    llm: LLMClient | None,
    cache_path: str | Path,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[int, int]:
    """Summarise every chapter with text that the cache lacks. Returns (n_new, n_cached).

    Chapters with (almost) no text of their own are skipped. Raises EngineError without an
    LLM, and the LLM's ProviderError on failure, after saving what was done so far.
    """
    if llm is None:
        raise EngineError(
            f"chapter summaries need an LLM; {NO_LLM_HINT} "
            "(or llm.base_url and llm.model in the config)"
        )
    path = Path(cache_path)
    entries = _read_cache(path)
    todo: list[tuple[str, Node]] = []
    n_cached = 0
    seen: set[str] = set()
    for node in kb.nodes.values():
        if len(_body(node)) < MIN_BODY_CHARS:
            continue
        h = content_hash(node)
        if h in entries:
            n_cached += 1
        elif h not in seen:
            todo.append((h, node))
        seen.add(h)
    n_new = 0
    try:
        for i, (h, node) in enumerate(todo, 1):
            crumb = " › ".join(node.breadcrumb)
            messages = [
                {"role": "system", "content": _SYSTEM},
                {"role": "user", "content": f"{crumb}\n\n{_body(node)[:CONTENT_CHARS]}"},
            ]
            summary = _clean(llm.chat(messages, max_tokens=160).content)
            if summary:
                entries[h] = {"summary": summary, "node_id": node.node_id, "model": llm.model}
                n_new += 1
            if n_new and n_new % SAVE_EVERY == 0:
                _write_cache(path, entries)
            if progress is not None:
                progress(i, len(todo))
    finally:
        if n_new:
            _write_cache(path, entries)
    return n_new, n_cached
