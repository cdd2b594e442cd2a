import multiprocessing as mp
import os
import stat
from pathlib import Path

import pytest

from engine.atomic import atomic_append_text, atomic_write_text


def test_new_file_gets_umask_mode_and_old_mode_is_kept(tmp_path):
    old = os.umask(0o022)
    try:
        p = tmp_path / "a.txt"
        atomic_write_text(p, "x")
        assert stat.S_IMODE(p.stat().st_mode) == 0o644
        p.chmod(0o600)
        atomic_write_text(p, "y")
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
        assert p.read_text() == "y"
    finally:
        os.umask(old)


def test_append_keeps_old_content_and_crash_keeps_file(tmp_path, monkeypatch):
    p = tmp_path / "log.md"
    atomic_append_text(p, "one\n")
    atomic_append_text(p, "two\n")
    assert p.read_text() == "one\ntwo\n"
    monkeypatch.setattr(os, "replace", lambda a, b: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        atomic_append_text(p, "three\n")
    assert p.read_text() == "one\ntwo\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["log.md"]


# Concurrent appends (the UI and the CLI logging experiments at once) lose nothing.


def _writer(path: str, tag: str, n: int) -> None:
    for i in range(n):
        atomic_append_text(Path(path), f"{tag}{i}\n")


def test_concurrent_appends_from_processes_keep_every_line(tmp_path: Path) -> None:
    p = tmp_path / "experiments.jsonl"
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(str(p), t, 40)) for t in "ab"]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    lines = p.read_text().splitlines()
    assert sorted(lines) == sorted([f"{t}{i}" for t in "ab" for i in range(40)])


def test_writer_replaces_the_file_only_when_the_block_ends_cleanly(tmp_path: Path) -> None:
    from engine.atomic import atomic_writer

    p = tmp_path / "counts.npz"
    p.write_bytes(b"old")
    with pytest.raises(RuntimeError), atomic_writer(p) as fh:
        fh.write(b"half of a new")
        raise RuntimeError("crash mid-write")
    assert p.read_bytes() == b"old"
    assert [q.name for q in tmp_path.iterdir()] == ["counts.npz"]  # no temp file left
    with atomic_writer(p) as fh:
        fh.write(b"new, ")
        fh.write(b"in pieces")
    assert p.read_bytes() == b"new, in pieces"
