"""Saved runs found by what they are: by id or config label, and the saved run of one
config on one index and golden set (so compare re-uses it instead of re-running)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from engine.errors import EngineError
from workbench.eval.run_labels import run_name
from workbench.eval.run_record import RunRecord, list_runs, load_run_record


@dataclass(frozen=True)
class RunKey:
    """What makes two runs interchangeable: same config, index build, golden set content,
    split, mode and rerank setting."""

    config_hash: str
    index_fingerprint: str
    dataset_hash: str
    split: str
    mode: str
    rerank: bool

    def matches(self, r: RunRecord) -> bool:
        return (
            r.config_hash == self.config_hash
            and r.index_fingerprint == self.index_fingerprint
            and r.dataset.hash == self.dataset_hash
            and r.split == self.split
            and self.mode in r.modes
            and r.rerank == self.rerank
            and r.errors == 0  # a run with failed queries is worth re-running
        )


def find_saved_run(runs_dir: str | Path, key: RunKey) -> RunRecord | None:
    """The newest saved run matching ``key``, None when there is none.

    Run ids end in the config hash's first six characters, so only those files are read.
    """
    short = key.config_hash[:6]
    for path in list_runs(runs_dir):
        stem = path.stem.split("-")
        if len(stem) < 3 or stem[2] != short:
            continue
        try:
            rec = load_run_record(path)
        except EngineError:  # an unreadable record is not a match; `runs` reports it
            continue
        if key.matches(rec):
            return rec
    return None


def load_run(runs_dir: str | Path, ref: str) -> RunRecord:
    """A saved run by id (``20261202-025305-2d8816``) or by config label (the newest run
    with that label, e.g. ``baseline+fusion.bm25_weight=0.4``); a one-line error naming
    the latest runs otherwise."""
    folder = Path(runs_dir)
    path = folder / f"{Path(ref).stem}.json"
    if path.is_file():
        return load_run_record(path)
    for p in list_runs(folder):
        label = _label_of(p)
        if label == ref:
            return load_run_record(p)
    known = ", ".join(f"{_label_of(p)} ({p.stem})" for p in list_runs(folder)[:5]) or "none"
    raise EngineError(
        f"no saved run {ref!r} (by id or label) in {folder}; latest: {known} "
        "(`wikirag runs list` shows them all)"
    )


@dataclass(frozen=True)
class RunListing:
    run_id: str
    label: str
    created: str
    dataset: str
    split: str
    modes: tuple[str, ...]
    queries: int
    means: dict[str, float]  # of the first mode

    @property
    def name(self) -> str:
        return run_name(self.label, self.created)


def list_saved_runs(runs_dir: str | Path, limit: int | None = None) -> list[RunListing]:
    """Saved runs newest first, named by label; unreadable records are skipped."""
    out = []
    for p in list_runs(runs_dir)[:limit]:
        try:
            r = load_run_record(p)
        except EngineError:
            continue
        out.append(
            RunListing(
                r.run_id,
                r.label,
                r.created,
                r.dataset.name,
                r.split,
                r.modes,
                len(r.for_mode(r.modes[0])),
                r.means(),
            )
        )
    return out


def saved_run_name(path: Path) -> str:
    """How a saved run is listed (``baseline · 2026-12-02 02:53``), read from the top of its
    file; the run id when the record cannot be read."""
    label, created = _head_field(path, "label"), _head_field(path, "created")
    if label is None or created is None:
        try:
            return load_run_record(path).name
        except EngineError:
            return path.stem
    return run_name(label, created)


def _label_of(path: Path) -> str:
    """A record's label without parsing all of it when it is near the top of the file."""
    label = _head_field(path, "label")
    if label is None:
        try:
            return load_run_record(path).label
        except EngineError:
            return ""
    return label


def _head_field(path: Path, name: str) -> str | None:
    """A text field written near the top of a record (``to_dict`` puts ``run_id``, ``label``
    and ``created`` first); None when it is not in the first 4 KB or not text."""
    try:
        with open(path, encoding="utf-8") as f:
            head = f.read(4096)
    except OSError:
        return None
    marker = f'"{name}": '
    i = head.find(marker)
    if i < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(head, i + len(marker))
    except ValueError:
        return None
    return value if isinstance(value, str) else None
