"""The files of one KB's experiments folder: the log, the baselines, the lock, recovery.

Concurrency: every writer (``run_experiment``, ``restore``, the optimize loop, the UI
buttons) holds one lock per KB (``flock`` on ``experiments/<kb>/.experiment.lock``) from
reading the baseline to writing it, so two experiments never decide against the same
baseline; a second writer is refused at once with who holds the lock since when.

Crash safety: nothing is written until both evaluations finished. Then (1) the JSONL
record (naming the baseline version it will create) and (2) the Markdown log entry are
appended atomically, and (3) for an accepted change ``baselines/vN.yaml`` and
``baseline.yaml`` are written. ``recover`` finishes (2) and (3) after a crash, writing
exactly the version the record names, so it is idempotent; whoever takes the lock next
runs it and says so (stderr in the CLI, a warning in the UI).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from engine.atomic import atomic_append_text, atomic_write_text
from engine.config import EngineConfig
from engine.errors import EngineError
from engine.yaml_safe import short
from workbench.tune.experiment_entry import LOG_HEADER, RESTORE_TITLE, entry_text, one_line
from workbench.tune.experiment_log import ExperimentResult, format_log_entry, now


class ExperimentStore:
    """The files of one KB's experiments folder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @property
    def log_md(self) -> Path:
        return self.folder / "optimization_log.md"

    @property
    def records(self) -> Path:
        return self.folder / "experiments.jsonl"

    @property
    def baseline(self) -> Path:
        return self.folder / "baseline.yaml"

    @property
    def versions(self) -> Path:
        return self.folder / "baselines"

    @property
    def lock_file(self) -> Path:
        return self.folder / ".experiment.lock"

    @contextlib.contextmanager
    def lock(self, what: str = "experiment") -> Iterator[None]:
        """Hold this KB's experiment lock; refuse at once if another writer holds it.

        Re-entrant within a thread (``optimize`` holds it around many ``run_experiment``
        calls). Two threads of one process (two UI sessions) open the file separately, and
        flock locks belong to the open file, so they exclude each other like processes do.
        """
        key = str(self.folder.resolve())
        held: dict[str, int] = _HELD.__dict__.setdefault("depth", {})
        if held.get(key):
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks; experiments run one at a time there
            yield
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ExperimentBusyError(self._busy_message(fd)) from None
            holder = json.dumps({"pid": os.getpid(), "since": now(), "what": what})
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode("utf-8"), 0)
            held[key] = 1
            try:
                yield
            finally:
                held[key] = 0
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # releases the flock

    def _busy_message(self, fd: int) -> str:
        try:
            info = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
        except ValueError:
            info = {}
        since = info.get("since", "an unknown time")
        what = f" ({info['what']}, pid {info.get('pid', '?')})" if info.get("what") else ""
        return (
            f"another experiment is running on {self.folder.name} since {since}{what}; "
            "wait for it to finish, then try again"
        )

    @contextlib.contextmanager
    def writing(self, what: str, notify: Callable[[str], None] | None = None) -> Iterator[None]:
        """The lock, plus recovery of an interrupted accept, reported through ``notify``."""
        with self.lock(what):
            msg = self.recover()
            if msg and notify is not None:
                notify(msg)
            yield

    def load_records(self) -> list[dict[str, Any]]:
        if not self.records.is_file():
            return []
        out = []
        for n, line in enumerate(self.records.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise EngineError(
                    f"{self.records}:{n} is not valid JSON ({exc}); fix or remove that line"
                ) from exc
            problem = _shape_problem(rec)
            if problem:
                raise EngineError(
                    f"{self.records}:{n} is not an experiment record ({problem}); fix or "
                    "remove that line"
                )
            out.append(rec)
        return out

    def repair(self) -> str | None:
        """``recover`` for commands that only read the baseline (eval, versions, ...), so they
        never use one a crash left stale; None when nothing was needed or another writer
        holds the lock (it recovers before its own work)."""
        if not self.records.is_file():
            return None
        try:
            return self.recover()
        except ExperimentBusyError:
            return None

    def baseline_config(self) -> EngineConfig:
        return EngineConfig.load(self.baseline) if self.baseline.is_file() else EngineConfig()

    def next_number(self) -> int:
        return max((r.get("number", 0) for r in self.load_records()), default=0) + 1

    def accepted_versions(self) -> list[dict[str, Any]]:
        """Version 0 is the first baseline; each accepted experiment adds one."""
        out = []
        for path in self.versions.glob("v*.yaml"):
            if path.stem[1:].isdigit():  # a user's "v2-old.yaml" copy is not a version
                out.append({"version": int(path.stem[1:]), "path": str(path)})
        return sorted(out, key=lambda v: v["version"])

    def ensure_initial_version(self) -> None:
        if not (self.versions / "v0.yaml").is_file():
            atomic_write_text(self.versions / "v0.yaml", self.baseline_config().to_yaml())
            if not self.baseline.is_file():
                atomic_write_text(self.baseline, EngineConfig().to_yaml())

    def next_version(self) -> int:
        return max((v["version"] for v in self.accepted_versions()), default=0) + 1

    def write_baseline(self, cfg: EngineConfig, version: int | None = None) -> int:
        """Write ``baselines/v<version>.yaml`` (default: the next number) and ``baseline.yaml``."""
        with self.lock("write baseline"):
            n = self.next_version() if version is None else version
            atomic_write_text(self.versions / f"v{n}.yaml", cfg.to_yaml())
            atomic_write_text(self.baseline, cfg.to_yaml())
            return n

    def append(self, result: ExperimentResult) -> None:
        # Under the lock so two first experiments cannot both write the header (and the
        # second header replace the first entry).
        with self.lock("append"):
            line = json.dumps(result.to_record(), ensure_ascii=False) + "\n"
            atomic_append_text(self.records, line)
            self._append_log(format_log_entry(result))

    def _append_log(self, entry: str) -> None:
        if not self.log_md.is_file():
            atomic_write_text(self.log_md, LOG_HEADER)
        atomic_append_text(self.log_md, entry)

    def recover(self) -> str | None:
        """Finish an accept a crash interrupted: its log entry, its version file, the baseline.

        Idempotent: the version file is the one the record names, so running it twice (or
        after a crash between the version file and ``baseline.yaml``) adds no ``vN.yaml``.
        Returns what was done, or None when nothing was needed.
        """
        with self.lock("recover"):
            records = self.load_records()
            recs = [r for r in records if r.get("decision") == "accepted"]
            if not recs:
                return None
            last = recs[-1]
            done = []
            log = self.log_md.read_text(encoding="utf-8") if self.log_md.is_file() else ""
            if f"### Experiment {last['number']}:" not in log:
                self._append_log(_recovered_log_entry(last))
                done.append("wrote its missing log entry")
            cfg = EngineConfig.from_yaml(last["config_yaml"])
            current = self.baseline_config().hash
            # The crash signature is a baseline still at the config the experiment started
            # from; any other baseline was edited by hand after the accept and is kept.
            started_from = (last.get("baseline") or {}).get("hash", current)
            if (
                current != cfg.hash
                and current == started_from
                and not _restored_after(records, last)
            ):
                n = self.write_baseline(cfg, self._version_of(last, cfg))
                done.append(f"re-applied baseline v{n}")
            if not done:
                return None
            return (
                f"recovered experiment {last['number']} after an interrupted write: "
                f"{' and '.join(done)}"
            )

    def _version_of(self, record: Mapping[str, Any], cfg: EngineConfig) -> int:
        if isinstance(record.get("baseline_version"), int):
            return int(record["baseline_version"])
        # Records written before versions were named: reuse a version file that already
        # holds this config (crash after writing it) rather than adding a duplicate.
        for v in reversed(self.accepted_versions()):
            if EngineConfig.load(v["path"]).hash == cfg.hash:
                return int(v["version"])
        return self.next_version()

    def restore(self, version: int, notify: Callable[[str], None] | None = None) -> EngineConfig:
        with self.writing("restore", notify):
            return self._restore(version)

    def _restore(self, version: int) -> EngineConfig:
        path = self.versions / f"v{version}.yaml"
        if not path.is_file():
            known = ", ".join(str(v["version"]) for v in self.accepted_versions()) or "none"
            raise EngineError(f"no baseline version {version}; known versions: {known}")
        cfg = EngineConfig.load(path)
        atomic_write_text(self.baseline, cfg.to_yaml())
        rec = {
            "number": self.next_number(),
            "title": RESTORE_TITLE.key.format(v=version),
            "date": now(),
            "tier": "restore",
            "decision": "restored",
            "restored_version": version,
            "config_yaml": cfg.to_yaml(),
            "result": {"hash": cfg.hash},
        }
        atomic_append_text(self.records, json.dumps(rec, ensure_ascii=False) + "\n")
        self._append_log(entry_text(rec))
        return cfg


class ExperimentBusyError(EngineError):
    """Another process or UI session holds this KB's experiment lock."""


_HELD = threading.local()  # per thread: lock depth by experiments folder (re-entrancy)


def _recovered_log_entry(rec: Mapping[str, Any]) -> str:
    return (
        f"\n### Experiment {rec['number']}: {one_line(str(rec.get('title', '')))}\n\n"
        f"- **Date**: {rec.get('date', '')}\n"
        f"- **Decision**: ✅ Accepted — new baseline (config {rec.get('result', {}).get('hash')}); "
        "this entry was completed after an interrupted write, details in experiments.jsonl\n"
    )


def _restored_after(records: list[dict[str, Any]], accepted: dict[str, Any]) -> bool:
    return any(
        r.get("decision") == "restored" and r["number"] > accepted["number"] for r in records
    )


# The keys this module reads from a record, and their types.
_RECORD_KEYS: dict[str, type | tuple[type, ...]] = {
    "number": int,
    "decision": str,
    "config_yaml": str,
    "baseline": dict,
    "baseline_version": (int, type(None)),
}


def _shape_problem(rec: Any) -> str:
    """Why ``rec`` is not an experiment record ("" when it is one)."""
    if not isinstance(rec, dict):
        return f"a JSON {type(rec).__name__}, not an object"
    for key, kind in _RECORD_KEYS.items():
        if key in rec and (not isinstance(rec[key], kind) or rec[key] is True or rec[key] is False):
            return f"{key!r} is {short(rec[key], 60)}"
    if rec.get("decision") == "accepted" and not {"number", "config_yaml"} <= rec.keys():
        return "an accepted record needs 'number' and 'config_yaml'"
    return ""
