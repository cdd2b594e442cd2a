"""Handing freed heap memory back to the operating system after a large load (glibc only).

Loading an index reads whole columns through LanceDB's Rust threads and builds large
temporary arrays; glibc keeps what they free in its (per-thread) arenas instead of
returning it, so a serving process stayed far above what it holds: at 100k chapters the
snapshot held ~230 MB of arrays and the process grew by ~680 MB (issue 15's
``serving_rss_mb``). ``release_free_heap`` asks glibc to return free pages
(``malloc_trim``); where there is no glibc (macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import sys
from typing import Any


@functools.cache
def _glibc() -> Any:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the C library this process already uses
    except OSError:  # pragma: no cover - a Linux without a loadable libc
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_free_heap() -> bool:
    """Return the C heap's free pages to the OS; True when glibc did so (a few ms)."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


__all__ = ["release_free_heap"]
