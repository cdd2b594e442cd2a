"""Atomic file writes: write a temp file in the same folder, fsync, then rename.

A crash at any point leaves either the old file or the new one, never a truncated mix.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_writer(path) as fh:
        fh.write(data)


@contextlib.contextmanager
def atomic_writer(path: Path) -> Iterator[BinaryIO]:
    """A binary file to write ``path`` through: it replaces ``path`` only when the block
    ends without an error. For payloads written piece by piece (an index's BM25 counts,
    ~0.5 GB at 1M chapters), so they are never held whole in memory."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp creates 0600; keep the old file's mode, else what the umask allows.
        os.fchmod(fd, _mode_for(path))
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_append_text(path: Path, text: str) -> None:
    """Append by rewriting atomically: the old content plus ``text``, never a half entry.

    Read-then-rewrite would drop an entry another process appended in between (the UI and
    the CLI logging experiments at once), so writers take turns on a lock file beside it;
    the lock cannot be the file itself, which each rewrite replaces, so it is the folder.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(path.parent):
        old = path.read_bytes() if path.exists() else b""
        atomic_write_bytes(path, old + text.encode("utf-8"))


def atomic_update_text(path: Path, update: Callable[[str], str]) -> None:
    """Rewrite ``path`` atomically as ``update(old text)`` ("" when absent), writers taking
    turns on the folder's lock (see ``atomic_append_text``), so no one's change is lost."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(path.parent):
        old = path.read_text(encoding="utf-8") if path.exists() else ""
        atomic_write_text(path, update(old))


@contextlib.contextmanager
def _exclusive(folder: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: no advisory locks; appends are rare and short
        yield
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock
