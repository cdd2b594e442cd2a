"""Concurrent appends (the UI and the CLI logging experiments at once) lose nothing."""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

from engine.atomic import atomic_append_text


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
