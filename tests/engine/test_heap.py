"""engine.heap: giving freed memory back after a load."""

from __future__ import annotations

import sys

import pytest

from engine.heap import release_free_heap


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_release_free_heap_returns_pages_to_the_os_on_glibc() -> None:
    import ctypes

    if not hasattr(ctypes.CDLL(None), "malloc_trim"):
        pytest.skip("not glibc")

    def rss_kib() -> int:
        with open("/proc/self/status", encoding="ascii") as fh:
            return next(int(x.split()[1]) for x in fh if x.startswith("VmRSS:"))

    # Many small blocks (below the mmap threshold) live in the heap; freed, glibc keeps them.
    blocks = [bytes(4000) for _ in range(40_000)]  # ~160 MB
    keep = blocks[::97]
    del blocks
    before = rss_kib()
    assert release_free_heap() is True
    assert rss_kib() < before - 50_000  # more than 50 MB given back
    assert keep


def test_release_free_heap_is_a_no_op_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    import engine.heap as heap

    monkeypatch.setattr(heap, "_glibc", lambda: None)
    assert heap.release_free_heap() is False
