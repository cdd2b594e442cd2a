"""Parsed documents kept per file, so re-parsing a KB costs in proportion to what changed.

A file is taken as unchanged when its size and modification time (ns) equal the cached
ones, or, when they differ, its bytes hash the same. Like git's index, a modification
time too close to the moment the entry was recorded is not trusted (an edit in the same
clock tick keeps size and mtime): such files are hashed on every pass until they age.
The cache lives in memory (a long-running engine) and can be saved to a file (the CLI).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import time
from dataclasses import dataclass
from pathlib import Path

from engine.atomic import atomic_write_bytes
from engine.chapters import Document
from engine.tree import parse_document, source_hash

# 2: Node became a slots dataclass; a format-1 pickle would restore fields wrongly.
CACHE_FORMAT = 2
# An mtime within this many ns of when the entry was recorded may hide a later edit.
RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class _Entry:
    size: int
    mtime_ns: int
    recorded_ns: int
    doc: Document


class ParseCache:
    """rel path -> the document parsed from that file, with the file's size and mtime."""

    def __init__(self) -> None:
        self.entries: dict[str, _Entry] = {}
        self.parsed = 0  # files parsed since the last reset_counts()
        self.reused = 0

    def reset_counts(self) -> None:
        self.parsed = self.reused = 0

    def document(self, path: str | Path, rel_path: str) -> Document:
        """The document of ``path`` (parsed only if the file changed). Raises OSError."""
        st = os.stat(path)
        hit = self.entries.get(rel_path)
        now = time.time_ns()
        if (
            hit is not None
            and hit.size == st.st_size
            and hit.mtime_ns == st.st_mtime_ns
            and hit.recorded_ns - st.st_mtime_ns > RACY_NS
        ):
            self.reused += 1
            return hit.doc
        data = Path(path).read_bytes()
        if hit is not None and hit.doc.source_hash == source_hash(data):
            doc = hit.doc
            self.reused += 1
        else:
            doc = parse_document(data, rel_path)
            self.parsed += 1
        self.entries[rel_path] = _Entry(len(data), st.st_mtime_ns, now, doc)
        return doc

    def keep_only(self, rel_paths: set[str]) -> None:
        """Forget files no longer in the KB."""
        for rel in [r for r in self.entries if r not in rel_paths]:
            del self.entries[rel]

    def save(self, path: str | Path) -> None:
        """Write the cache atomically (pickle: a private file of this machine's user)."""
        payload = pickle.dumps((CACHE_FORMAT, self.entries), protocol=pickle.HIGHEST_PROTOCOL)
        atomic_write_bytes(Path(path), payload)

    @classmethod
    def load(cls, path: str | Path) -> ParseCache:
        """The cache saved at ``path``; an empty one if it is missing, old or unreadable."""
        cache = cls()
        with contextlib.suppress(
            OSError,
            pickle.UnpicklingError,
            EOFError,
            ValueError,
            TypeError,
            AttributeError,
            ImportError,
        ):
            fmt, entries = pickle.loads(Path(path).read_bytes())
            if fmt == CACHE_FORMAT and isinstance(entries, dict):
                cache.entries = entries
        return cache
