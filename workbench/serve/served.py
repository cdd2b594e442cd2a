"""The engine a server answers from (opened lazily, rebuilt hot) and its rebuild jobs."""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
import traceback
import uuid
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.errors import EngineError, IndexMissingError
from engine.manifest import MANIFEST
from engine.tree import markdown_files, parse_kb
from workbench.eval.engines import open_engine
from workbench.workspace import Workspace

REOPEN_EVERY_S = 2.0  # how often a server without an engine retries opening the index
# How often a serving engine looks (one stat of manifest.json) for an index rebuilt by another
# process, e.g. `wikirag index` from the CLI; the switch itself runs beside the requests.
FOLLOW_EVERY_S = 1.0
KEEP_JOBS = 50


def _log(msg: str) -> None:
    sys.stderr.write(f"wikirag serve: {msg}\n")
    sys.stderr.flush()


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def kb_file_signature(kb_dir: str | os.PathLike[str]) -> str:
    """Cheap fingerprint of a KB folder: every Markdown file's path, size and mtime."""

    h = hashlib.sha256()
    for p in markdown_files(Path(kb_dir)):
        try:
            st = p.stat()
        except OSError:
            continue
        h.update(f"{p}\x00{st.st_size}\x00{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


class ServedEngine:
    """The engine behind a server. Opened at start; a server without an index still starts.

    ``get()`` returns the engine or raises the EngineError that kept it from opening (no
    index, embedder mismatch), retrying the open at most every REOPEN_EVERY_S seconds so an
    index built by another process is picked up. Thread-safe.
    """

    def __init__(
        self,
        ws: Workspace,
        cfg: EngineConfig,
        *,
        engine: Any | None = None,
        missing_hint: str = "or POST /admin/rebuild-index to build it while the server runs",
    ) -> None:
        self.ws = ws
        self.cfg = cfg
        self.missing_hint = missing_hint
        self._lock = threading.Lock()
        self._engine = engine
        self._error: EngineError | None = None
        self._tried_at = 0.0
        self._health_cache: tuple[str, str, dict[str, Any]] | None = None
        self._manifest_stat = self._stat_manifest()
        self._checked_at = time.monotonic()
        self._switching: threading.Thread | None = None
        if engine is None:
            self._open()

    def _open(self) -> None:
        self._tried_at = time.monotonic()
        try:
            engine = open_engine(self.ws, self.cfg)
        except EngineError as exc:
            self._error = exc
            _log(f"not serving searches yet: {exc}")
            return
        try:
            engine.warm_up()  # models load now, not inside the first request
            engine.search("warm up", top_k=1)  # jieba's dictionary, BM25 weights
        except EngineError as exc:  # e.g. a remote embedder down: searches will say so
            _log(f"warm-up failed: {exc}")
        self._engine, self._error = engine, None

    def get(self) -> Any:
        eng = self._engine
        if eng is not None:
            self._follow(eng)
            return eng
        with self._lock:
            if self._engine is None and time.monotonic() - self._tried_at >= REOPEN_EVERY_S:
                self._open()
            if self._engine is not None:
                return self._engine
            err = self._error or IndexMissingError("no index loaded")
        raise type(err)(f"{err} ({self.missing_hint})" if self.missing_hint else str(err))

    def _stat_manifest(self) -> tuple[int, int] | None:
        """(mtime_ns, size) of the index's manifest.json; None when absent or not local."""
        try:
            st = os.stat(Path(str(self.ws.index)) / MANIFEST)
        except (OSError, ValueError):
            return None
        return (st.st_mtime_ns, st.st_size)

    def _follow(self, eng: Any) -> None:
        """Switch to an index another process rebuilt, without holding up this request.

        Requests keep the snapshot they have until the new one is loaded (``Engine.refresh``
        swaps it under its own lock), so nothing is dropped while it loads; until then
        ``health()`` says the index on disk is newer.
        """
        now = time.monotonic()
        if now - self._checked_at < FOLLOW_EVERY_S:
            return
        with self._lock:
            if now - self._checked_at < FOLLOW_EVERY_S:
                return
            self._checked_at = now
            stat = self._stat_manifest()
            busy = self._switching is not None and self._switching.is_alive()
            if stat == self._manifest_stat or stat is None or busy:
                return
            self._switching = threading.Thread(
                target=self._switch, args=(eng, stat), name="wikirag-follow-index", daemon=True
            )
            self._switching.start()

    def _switch(self, eng: Any, stat: tuple[int, int]) -> None:
        try:
            if eng.refresh():
                self._health_cache = None
                _log("switched to the index rebuilt on disk")
            self._manifest_stat = stat
        except EngineError as exc:  # e.g. a half-written index: try again at the next look
            _log(f"could not switch to the rebuilt index yet: {exc}")
        except Exception as exc:  # a background switch must never kill serving
            _log(f"could not switch to the rebuilt index: {type(exc).__name__}: {exc}")

    def wait_switched(self, timeout: float | None = None) -> None:
        """Wait for a switch in progress (tests, shutdown)."""
        t = self._switching
        if t is not None:
            t.join(timeout)

    @property
    def loaded(self) -> bool:
        return self._engine is not None

    def rebuild(self, *, force: bool = False, progress: Any = None) -> Any:
        """Re-index and switch searches to the result; returns the IndexReport."""
        eng = self._engine
        if eng is not None:
            return eng.rebuild(force=force, progress=progress)
        from engine.indexer import build_index  # deferred: loads lancedb (~2 s)

        report = build_index(parse_kb(self.ws.kb), self.cfg, str(self.ws.index), progress, force)
        with self._lock:
            self._open()
            if self._error is not None:
                raise self._error
        return report

    def health(self) -> dict[str, Any]:
        """Status, with a reason (and what to do) for everything that is not right."""
        from engine.index_plan import freshness  # deferred: loads lancedb (~2 s)
        from engine.manifest import read_manifest  # deferred: loads lancedb (~2 s)
        from engine.store import Location  # deferred: loads lancedb (~2 s)

        reasons: list[str] = []
        info: dict[str, Any] = {"index_build": None, "embedder": None}
        try:
            eng = self.get()
        except EngineError as exc:
            return {"status": "degraded", "reasons": [str(exc)], "serving": False, **info}
        stats = eng.stats()
        loaded = stats["index"]["build_id"]
        sig = stats["embedder"]
        info["index_build"] = loaded
        info["embedder"] = f"{sig['provider']}/{sig['model']}/{sig['dims']}"
        try:
            on_disk = read_manifest(Location(str(self.ws.index)))
        except EngineError as exc:
            on_disk = None
            reasons.append(str(exc))
        if on_disk is None:
            reasons.append(
                f"the index at {self.ws.index} is gone (serving the copy in memory); "
                "POST /admin/rebuild-index to rebuild it"
            )
        elif on_disk.signature != sig:
            d = on_disk.signature
            reasons.append(
                f"embedder mismatch: the index on disk was rebuilt with "
                f"{d['provider']}/{d['model']}/{d['dims']} but this server serves "
                f"{info['embedder']}; POST /admin/rebuild-index to rebuild it for this config"
            )
        elif on_disk.build_id != loaded:
            reasons.append(
                "the index on disk was rebuilt by another process; POST /admin/rebuild-index "
                "(a no-op re-index) to switch to it"
            )
        if not os.path.isdir(self.ws.kb):
            # Health must describe the problem, not fail on it (it answered 400 here).
            reasons.append(
                f"the knowledge base folder {self.ws.kb} is missing (serving the index in "
                "memory); restore the folder, or restart `wikirag serve --kb DIR`"
            )
            return {"status": "degraded", "reasons": reasons, "serving": True, **info}
        # Freshness against the KB as it is on disk now (the engine's own is from load time).
        kb_sig = kb_file_signature(self.ws.kb)
        cached = self._health_cache
        if cached is not None and cached[0] == kb_sig and cached[1] == loaded:
            fresh = cached[2]
        else:
            manifest = on_disk if on_disk is not None and on_disk.build_id == loaded else None
            if manifest is None:
                fresh = dict(stats["freshness"])
            else:
                fresh = freshness(parse_kb(self.ws.kb), self.cfg, manifest)
            self._health_cache = (kb_sig, loaded, fresh)
        if not fresh.get("fresh", False):
            reasons.append(
                f"index is stale: {fresh.get('new', 0)} new, {fresh.get('changed', 0)} changed, "
                f"{fresh.get('deleted', 0)} deleted chapters since it was built; "
                "POST /admin/rebuild-index (or run `wikirag index`)"
            )
        return {
            "status": "degraded" if reasons else "ok",
            "reasons": reasons,
            "serving": True,
            **info,
        }


@dataclass
class Job:
    job_id: str
    force: bool
    kind: str = "rebuild-index"
    status: str = "queued"
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    stage: str = ""
    done: int = 0
    total: int = 0
    result: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class JobConflict(Exception):
    def __init__(self, job: Job) -> None:
        super().__init__(job.job_id)
        self.job = job


class RebuildJobs:
    """One rebuild at a time, in a background thread; the last KEEP_JOBS jobs are kept."""

    def __init__(self, served: ServedEngine) -> None:
        self._served = served
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._running: Job | None = None
        self._threads: list[threading.Thread] = []

    def start(self, force: bool) -> Job:
        with self._lock:
            if self._running is not None:
                raise JobConflict(self._running)
            job = Job(job_id=uuid.uuid4().hex[:12], force=force)
            self._jobs[job.job_id] = job
            while len(self._jobs) > KEEP_JOBS:
                self._jobs.popitem(last=False)
            self._running = job
            t = threading.Thread(
                target=self._run, args=(job,), name=f"wikirag-rebuild-{job.job_id}", daemon=True
            )
            self._threads = [x for x in self._threads if x.is_alive()] + [t]
        t.start()
        return job

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def list(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def join(self, timeout: float | None = None) -> None:
        """Wait for running jobs (used at shutdown and by tests)."""
        for t in list(self._threads):
            t.join(timeout)

    def _run(self, job: Job) -> None:
        def progress(done: int, total: int, stage: str) -> None:
            job.stage, job.done, job.total = stage, int(done), int(total)

        job.status, job.started_at = "running", _now()
        _log(f"rebuild job {job.job_id} started (force={job.force})")
        try:
            report = self._served.rebuild(force=job.force, progress=progress)
            job.result = report.to_dict()
            job.status = "succeeded"
            _log(f"rebuild job {job.job_id}: {report.summary()}")
        except EngineError as exc:
            job.error, job.status = str(exc), "failed"
            _log(f"rebuild job {job.job_id} failed: {exc}")
        except Exception as exc:  # a job must record every failure, not die silently
            job.error, job.status = f"{type(exc).__name__}: {exc}", "failed"
            _log(f"rebuild job {job.job_id} crashed:\n{traceback.format_exc()}")
        finally:
            job.finished_at = _now()
            job.stage = "done" if job.status == "succeeded" else job.stage
            with self._lock:
                self._running = None


def node_brief(node: Any) -> dict[str, Any]:
    """A chapter as listed under another: id, title, level, breadcrumb, summary, content."""
    return {
        "node_id": node.node_id,
        "title": node.title,
        "level": node.level,
        "breadcrumb": list(node.breadcrumb),
        "summary": node.summary,
        "content": node.content,
    }


def chapter_payload(engine: Any, node_id: str, *, children: bool = True) -> dict[str, Any]:
    """One chapter with its metadata (and children); UnknownNodeError names close ids."""
    from engine.response import node_metadata  # deferred: loads lancedb (~2 s)

    node = engine.chapter(node_id)
    return {
        "node_id": node.node_id,
        "doc_id": node.doc_id,
        "title": node.title,
        "level": node.level,
        "breadcrumb": list(node.breadcrumb),
        "content": node.content,
        "summary": node.summary,
        "parent_id": node.parent_id,
        "metadata": node_metadata(node),
        "children": [node_brief(n) for n in engine.children(node.node_id)] if children else [],
    }
