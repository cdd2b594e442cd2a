"""Index life cycle: build, update incrementally, rebuild without taking search down.

An index folder (or object-store prefix) holds LanceDB tables ``chapters_<build>`` and a
``manifest.json`` (engine/manifest.py) naming the current table *and version*, the
embedder signature and one hash pair per node. Readers load exactly that version, so
writers can work on the side:

- incremental update (same embedder): only new/changed nodes are embedded
  (engine/index_plan.py decides which); their rows are written and removed ones deleted in
  the current table (engine/table_write.py), which creates new table versions; the
  manifest is switched to the final version at the end.
- full rebuild (first build, ``force``, or a changed embedder signature): rows go into a
  NEW table; the manifest switches to it only once it is complete; old tables are then
  dropped. A crash at any point leaves the previous manifest, table version and caches.

After the rows, the BM25 term counts (engine/term_counts.py) and the expansion vocabulary
are saved beside the table under names unique to the build (engine/index_caches.py), then
the manifest switch makes them current together. An update saves only what changed since
the last full save: a delta of the counts (engine/lexical_delta.py) and the changed node
and file hashes (engine/hash_tables.py); past a share of the rows it saves them whole.

This module orchestrates; the names callers used to import from it are re-exported.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from engine.ann import create_vector_index
from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.embedding import make_embedder
from engine.hash_tables import FileHashes, NodeHashes, base_payload
from engine.heap import release_free_heap
from engine.index_caches import (
    DeltaCounts,
    caches_present,
    drop_stale_files,
    lexical_from_table,
    load_base,
    load_counts,
    load_delta_state,
    stored_terms,
    stored_title_terms,
    write_caches,
    write_delta_caches,
)
from engine.index_caches import split_lexical_payload as split_lexical_payload
from engine.index_plan import file_hashes, fingerprint, hash_context, plan_update
from engine.index_plan import freshness as freshness
from engine.index_plan import kb_hashes as kb_hashes
from engine.lexical_delta import extended, merged, needs_compaction
from engine.manifest import MANIFEST as MANIFEST
from engine.manifest import SUMMARIES, Manifest, load_llm_summaries, now_stamp, write_manifest
from engine.manifest import read_manifest as read_manifest
from engine.manifest import require_manifest as require_manifest
from engine.rows import embed_text as embed_text  # re-exported: callers import it from here
from engine.rows import lexical_text as lexical_text
from engine.rows import summary_key
from engine.store import PASSAGES, TABLE_PREFIX, ChapterTable, Location, Store
from engine.table_write import ROW_BATCH as ROW_BATCH  # engine/ray_build.py reads it here
from engine.table_write import write_full, write_incremental
from engine.term_counts import LexicalCounts, patched
from engine.term_counts import lexical_of as lexical_of
from engine.types import Embedder, EmbedderSignature
from engine.types import ProgressFn as ProgressFn

__all__ = [
    "IndexReport",
    "build_index",
    "commit_build",
    "drop_stale_tables",
    "new_table_name",
    "previous_manifest",
]


@dataclass
class IndexReport:
    """What one ``build_index`` call did."""

    added: int = 0
    updated: int = 0  # changed nodes (re-embedded, or row-only changes such as metadata)
    removed: int = 0
    unchanged: int = 0
    full_rebuild: bool = False
    warnings: list[str] = field(default_factory=list)
    seconds: float = 0.0
    embedded: int = 0  # chapter texts sent to the embedder
    table: str = ""
    version: int = 0
    rows: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        kind = "full rebuild" if self.full_rebuild else "incremental"
        return (
            f"{kind}: {self.added} added, {self.updated} updated, {self.removed} removed, "
            f"{self.unchanged} unchanged ({self.rows} rows, {self.embedded} embedded) "
            f"in {self.seconds:.1f}s"
            + (f", {len(self.warnings)} warning(s)" if self.warnings else "")
        )


def build_index(
    kb: KnowledgeBase,
    cfg: EngineConfig,
    index_uri: str,
    progress: ProgressFn | None = None,
    force: bool = False,
    *,
    embedder: Embedder | None = None,
    storage_options: Mapping[str, str] | None = None,
    drop_old: bool = True,
    workers: int | None = None,
    ann_min_rows: int | None = None,
) -> IndexReport:
    """Create or update the index of ``kb`` at ``index_uri`` (see the module docstring).

    ``progress(done, total, stage)`` is called per batch; stages: embed, write, lexical,
    vocab. ``drop_old=False`` keeps superseded tables (the caller drops them later with
    ``drop_stale_tables``, e.g. once its readers have switched). ``workers``: processes
    that tokenize and build rows during a full build (None: one per CPU once the KB is
    big enough to pay for starting them; 0 or 1: in this process). ``ann_min_rows``: from
    this many rows the table gets an approximate vector index (None: ``index.ann_min_rows``
    of ``cfg``; 0: never).
    """
    if ann_min_rows is None:
        ann_min_rows = cfg.index.ann_min_rows
    t0 = time.perf_counter()
    if embedder is None:
        embedder = make_embedder(cfg.embedding)
    loc = Location(index_uri, storage_options)
    store = Store(index_uri, storage_options)
    with loc.exclusive():  # one builder at a time per index folder, across processes
        report = _Build(kb, cfg, store, loc, embedder, progress).run(force, workers, ann_min_rows)
        if drop_old:  # under the same lock: the manifest still names report.table
            _drop_tables_except(store, report.table)
    report.seconds = time.perf_counter() - t0
    return report


def drop_stale_tables(index_uri: str, storage_options: Mapping[str, str] | None = None) -> int:
    """Drop every chapters_* table the manifest does not name. Returns how many.

    Takes the build lock, so a build in progress elsewhere (whose new table the manifest
    does not name yet) finishes first.
    """
    loc = Location(index_uri, storage_options)
    with loc.exclusive():
        m = read_manifest(loc)
        if m is None:
            return 0
        return _drop_tables_except(Store(index_uri, storage_options), m.table)


def _drop_tables_except(store: Store, table: str) -> int:
    stale = [t for t in store.table_names() if t.startswith(TABLE_PREFIX) and t != table]
    for t in stale:
        store.drop_table(t)
    return len(stale)


def new_table_name() -> str:
    """A fresh ``chapters_<utc time>_<random>`` name for a full build's table."""
    return f"{TABLE_PREFIX}{datetime.now(UTC):%Y%m%dT%H%M%S%f}_{secrets.token_hex(2)}"


def previous_manifest(
    loc: Location, store: Store, sig: EmbedderSignature, report: IndexReport
) -> Manifest | None:
    """The manifest a build starts from (None when its table is gone), with warnings."""
    old = read_manifest(loc)
    if old is not None and old.table not in set(store.table_names()):
        report.warnings.append(
            f"the manifest names table {old.table}, which is missing; rebuilding from scratch"
        )
        return None
    if old is not None and old.embedder_signature != sig:
        was = old.embedder_signature
        report.warnings.append(
            f"embedder changed ({was.provider}/{was.model}/{was.dims} -> "
            f"{sig.provider}/{sig.model}/{sig.dims}): full rebuild, every chapter re-embedded"
        )
    return old


def commit_build(
    loc: Location,
    tbl: ChapterTable,
    table_name: str,
    cfg: EngineConfig,
    embedder: Embedder,
    hashes: Mapping[str, Sequence[str]],
    lexical: LexicalCounts | DeltaCounts,
    summaries: Mapping[str, str],
    files: Mapping[str, str],
    old: Manifest | None,
    *,
    full: bool,
    force: bool,
    ann_min_rows: int | None,
    progress: ProgressFn | None,
) -> int:
    """After the rows: vector index, BM25 and vocabulary caches, then the manifest switch.

    ``lexical``: the full counts (written as a new base), or an update's delta against
    ``old``'s base. Returns the table version the new manifest names. (A Ray build,
    engine/ray_build.py, ends the same way.)
    """
    sig = embedder.signature
    if ann_min_rows is None:  # the Ray build follows the config like the local one
        ann_min_rows = cfg.index.ann_min_rows
    vector_index = "" if full or old is None else old.vector_index
    n_rows = len(hashes)
    if not vector_index and ann_min_rows > 0 and n_rows >= ann_min_rows:
        # Rows an update adds later are searched exactly by LanceDB beside the index.
        if progress:
            progress(0, 1, "vector index")
        # What the rows and counts freed goes back first: IVF_PQ training adds ~650 MB at
        # 1M rows, on top of a heap glibc would otherwise keep at its high-water mark.
        release_free_heap()
        vector_index = create_vector_index(tbl, n_rows, sig.dims)
    version = int(tbl.version)
    build_id = f"{table_name}_v{version}"
    prev = None if force else old  # force: every vocabulary vector embedded again
    if isinstance(lexical, DeltaCounts):
        assert old is not None  # a delta is against the previous build's base
        files_ = write_delta_caches(loc, build_id, old, lexical, embedder, progress)
    else:
        files_ = write_caches(loc, build_id, lexical, embedder, prev, progress)
    nodes, file_table = _hash_tables(loc, build_id, hashes, files, None if full else old)
    now = now_stamp()
    manifest = Manifest(
        table=table_name,
        version=version,
        signature=sig.to_dict(),
        tokenizer=cfg.lexical.tokenizer_spec,
        content_chars=cfg.index.content_chars,
        nodes=nodes,
        kb_fingerprint=fingerprint(nodes),
        created_at=now if full or old is None else old.created_at,
        updated_at=now,
        build_id=build_id,
        lexical_file=files_.lexical,
        crumbs_file=files_.crumbs,
        lexical_stats_file=files_.stats,
        lexical_delta_file=files_.delta,
        vocab_terms_file=files_.vocab_terms,
        vocab_vectors_file=files_.vocab_vectors,
        summaries=dict(summaries),
        files=file_table,
        hash_context=hash_context(cfg, summaries),
        title_terms=None,  # in the stats file and the delta
        vector_index=vector_index,
    )
    write_manifest(loc, manifest)  # the switch: atomic
    drop_stale_files(loc, manifest)
    return version


def _hash_tables(
    loc: Location,
    build_id: str,
    hashes: Mapping[str, Sequence[str]],
    files: Mapping[str, str],
    old: Manifest | None,
) -> tuple[NodeHashes, FileHashes]:
    """The node and file hashes as the manifest keeps them: changes against ``old``'s base
    file, or (a full build, many changes, an older manifest) a new base file."""
    nodes = NodeHashes.of(hashes)
    prev = FileHashes.of(old.files) if old is not None else FileHashes.of({})
    table = prev.updated(prev.diff(files)) if prev.base_file else FileHashes.of(files)
    if nodes.needs_base() or table.needs_base() or nodes.base_file != table.base_file:
        name = f"hashes_{build_id}.json"
        nodes, table = nodes.rebased(name), table.rebased(name)
        loc.write_bytes(name, base_payload(nodes, table))
    return nodes, table


@dataclass
class _Build:
    """One ``build_index`` call under the build lock."""

    kb: KnowledgeBase
    cfg: EngineConfig
    store: Store
    loc: Location
    embedder: Embedder
    progress: ProgressFn | None
    report: IndexReport = field(default_factory=IndexReport)

    def run(self, force: bool, workers: int | None, ann_min_rows: int) -> IndexReport:
        sig = self.embedder.signature
        old = previous_manifest(self.loc, self.store, sig, self.report)
        full = force or old is None or old.embedder_signature != sig
        if (
            not full
            and old is not None
            and self.cfg.index.passage_chars
            and PASSAGES not in self.store.open_table(old.table).schema.names
        ):
            # A table from before passage vectors has no column to write them into.
            self.report.warnings.append(
                "the index has no passage vectors (built before them): full rebuild"
            )
            full = True
        self.report.full_rebuild = full
        summaries = self._summaries()
        lexical: LexicalCounts | DeltaCounts
        if full:
            table_name, tbl, hashes, lexical = self._write_new_table(summaries, workers, old)
        else:
            assert old is not None  # full is True when it is None
            done = self._update(old, summaries, ann_min_rows)
            if done is None:
                return self.report  # nothing changed
            table_name, tbl, hashes, lexical = done
        version = commit_build(
            self.loc,
            tbl,
            table_name,
            self.cfg,
            self.embedder,
            hashes,
            lexical,
            summaries,
            file_hashes(self.kb),
            old,
            full=full,
            force=force,
            ann_min_rows=ann_min_rows,
            progress=self.progress,
        )
        self.report.table, self.report.version = table_name, version
        self.report.rows = len(hashes)
        return self.report

    def _summaries(self) -> dict[str, str]:
        """The LLM summaries of this KB's chapters, when ``index.use_summaries`` asks."""
        if not self.cfg.index.use_summaries:
            return {}
        loaded = load_llm_summaries(self.loc)
        nodes = self.kb.nodes.values()
        out = {summary_key(n): loaded[summary_key(n)] for n in nodes if summary_key(n) in loaded}
        if not out:
            self.report.warnings.append(
                f"index.use_summaries is on but {self.loc.uri}/{SUMMARIES} has no summaries for "
                "this KB; chapters were embedded with their own first sentences"
            )
        return out

    def _write_new_table(
        self, summaries: dict[str, str], workers: int | None, old: Manifest | None
    ) -> tuple[str, Any, Mapping[str, Sequence[str]], LexicalCounts]:
        # Every row is rebuilt: hashes are computed beside the rows (in the workers).
        nodes, prev = self.kb.nodes, {} if old is None else old.nodes
        r = self.report
        added = [n for n in nodes if n not in prev]
        r.added, r.removed = len(added), len([n for n in prev if n not in nodes])
        r.updated, r.unchanged = len(nodes) - len(added), 0
        table_name = new_table_name()
        tbl = self.store.create_table(table_name, self.embedder.signature.dims)
        hashes, lexical = write_full(
            tbl, self.kb, self.cfg, self.embedder, summaries, self.progress, workers
        )
        r.embedded = len(hashes)
        return table_name, tbl, hashes, lexical

    def _update(
        self, old: Manifest, summaries: dict[str, str], ann_min_rows: int
    ) -> tuple[str, Any, Mapping[str, Sequence[str]], LexicalCounts | DeltaCounts] | None:
        """Write the changes into the current table (None when there are none).

        The counts come back as a delta against ``old``'s base, or in full (to be saved as
        a new base) once the delta is big or ``old`` has none.
        """
        plan = plan_update(self.kb, self.cfg, summaries, old)
        r = self.report
        r.added, r.removed, r.updated = len(plan.added), len(plan.removed), len(plan.changed)
        r.unchanged = len(self.kb.nodes) - len(plan.added) - len(plan.changed)
        if plan.empty and caches_present(self.loc, old):
            current = old
            files = FileHashes.of(old.files)
            touched = files.diff(file_hashes(self.kb))
            if touched:  # touched files, same chapters: remember them
                current = replace(current, files=files.updated(touched), updated_at=now_stamp())
            n_rows = len(old.nodes)
            if not old.vector_index and 0 < ann_min_rows <= n_rows:
                # The threshold was lowered (or turned on) for a KB that did not change.
                tbl = self._open_at(old)
                if self.progress:
                    self.progress(0, 1, "vector index")
                desc = create_vector_index(tbl, n_rows, self.embedder.signature.dims)
                current = replace(
                    current, version=int(tbl.version), vector_index=desc, updated_at=now_stamp()
                )
            if current is not old:
                write_manifest(self.loc, current)
            r.table, r.version, r.rows = old.table, current.version, n_rows
            return None
        tbl = self._open_at(old)
        state = load_delta_state(self.loc, old)
        if state is not None:
            stats, delta = state
            in_delta = set(delta.ids)
            from_base = [s for s in plan.stale if s not in in_delta]
            stale_titles, stale_df = stored_terms(tbl, plan.stale, from_base)
            rows, r.embedded = write_incremental(
                tbl, self.kb, self.cfg, self.embedder, plan, summaries, old.nodes, self.progress
            )
            delta = extended(delta, plan.stale, stale_df, stale_titles, rows)
            if not needs_compaction(delta, len(plan.hashes)):
                return old.table, tbl, plan.hashes, DeltaCounts(stats, delta)
            base = load_base(self.loc, old)
            with contextlib.suppress(ValueError):  # an inconsistent delta: count again
                if base is not None:
                    return old.table, tbl, plan.hashes, merged(base, stats, delta)
            lexical = lexical_from_table(self.store, old.table, self.cfg.lexical.tokenizer_spec)
            return old.table, tbl, plan.hashes, lexical
        stale_titles = stored_title_terms(tbl, plan.stale)
        rows, r.embedded = write_incremental(
            tbl, self.kb, self.cfg, self.embedder, plan, summaries, old.nodes, self.progress
        )
        prev = load_counts(self.loc, old)
        if prev is None:
            lexical = lexical_from_table(self.store, old.table, self.cfg.lexical.tokenizer_spec)
        else:
            lexical = patched(prev, plan.stale, stale_titles, rows)
        return old.table, tbl, plan.hashes, lexical

    def _open_at(self, old: Manifest) -> Any:
        """The manifest's table at the manifest's version."""
        tbl = self.store.open_table(old.table)
        if tbl.version != old.version:
            # A crashed update left versions past the manifest's: start from the manifest's.
            tbl.restore(old.version)
        return tbl
