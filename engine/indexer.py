"""Index life cycle: build, update incrementally, rebuild without taking search down.

An index folder (or object-store prefix) holds LanceDB tables ``chapters_<build>`` and a
``manifest.json`` naming the current table *and version*, the embedder signature and one
hash pair per node. Readers load exactly that version, so writers can work on the side:

- incremental update (same embedder): only new/changed nodes are embedded; rows are
  upserted (merge_insert on "id") and deleted in the current table, which creates new
  table versions; the manifest is switched to the final version at the end.
- full rebuild (first build, ``force``, or a changed embedder signature): rows go into a
  NEW table; the manifest switches to it only once it is complete; old tables are then
  dropped. A crash at any point leaves the previous manifest, table version and caches.

After the rows, the BM25 term counts and the expansion vocabulary are rebuilt from the
table's tokens and saved beside it under names unique to the build, then the manifest
switch makes them current together.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import json
import os
import secrets
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
import scipy.sparse as sp

from engine.config import EngineConfig
from engine.errors import EngineError, IndexMissingError
from engine.expansion import Vocabulary, embed_vocabulary, vocabulary_from_df
from engine.lexical import SparseBM25, count_matrix, replace_rows, title_tokens, warm_up
from engine.rows import TEXT_LAYOUT, RowBatch, build_rows, node_hashes, title_terms_of
from engine.rows import embed_text as embed_text  # re-exported: callers import it from here
from engine.rows import lexical_text as lexical_text
from engine.rows import summary_key as summary_key
from engine.store import (
    TABLE_PREFIX,
    Location,
    Store,
    create_vector_index,
    sql_str,
    vectors_of,
)
from engine.tree import KnowledgeBase, Node
from engine.types import Embedder, EmbedderSignature

MANIFEST = "manifest.json"
SUMMARIES = "summaries.json"  # LLM chapter summaries (workbench/answer/summaries.py writes it)
MANIFEST_FORMAT = 1

ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class Manifest:
    """What ``manifest.json`` records about the current index."""

    table: str
    version: int
    signature: dict[str, Any]  # EmbedderSignature.to_dict()
    tokenizer: str
    content_chars: int
    nodes: dict[str, list[str]]  # node_id -> [embed hash, row hash]
    kb_fingerprint: str
    created_at: str
    updated_at: str
    build_id: str  # names this exact table version and its caches
    lexical_file: str = ""
    crumbs_file: str = ""  # the BM25 title field's counts over its own terms (for updates)
    vocab_terms_file: str = ""
    vocab_vectors_file: str = ""
    summaries: dict[str, str] = field(default_factory=dict)  # LLM summaries used, by content hash
    format: int = MANIFEST_FORMAT
    # For updates in proportion to the change: the source hash of every indexed file (its
    # nodes' hashes are reused while it is unchanged and ``hash_context`` holds), and how
    # many rows give each title/keyword term (the vocabulary keeps those terms).
    files: dict[str, str] = field(default_factory=dict)
    hash_context: str = ""
    title_terms: dict[str, int] | None = None
    vector_index: str = ""  # the approximate vector index ("" = exact search in memory)

    @property
    def embedder_signature(self) -> EmbedderSignature:
        return EmbedderSignature(**self.signature)

    def to_json(self) -> str:
        # Not asdict() and no indent: asdict deep-copies every node's hash pair and indent
        # switches json to its pure-Python encoder (seconds at 100k nodes, both).
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        return json.dumps(data, ensure_ascii=False, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Manifest:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


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


def load_llm_summaries(loc: Location) -> dict[str, str]:
    """``summaries.json`` beside the index ({} when absent): content hash -> summary."""
    text = loc.read_text(SUMMARIES)
    if text is None:
        return {}
    try:
        data = json.loads(text)
        entries = data.get("summaries", {})
        return {k: str(v["summary"]) for k, v in entries.items() if v.get("summary")}
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise EngineError(
            f"{loc.uri}/{SUMMARIES} is unreadable ({exc}); delete it or rerun the summaries"
        ) from exc


def kb_hashes(
    kb: KnowledgeBase,
    cfg: EngineConfig,
    summaries: Mapping[str, str] | None = None,
    reuse: Manifest | None = None,
) -> dict[str, tuple[str, str]]:
    """Every node's hash pair; a file whose bytes ``reuse`` has indexed keeps its hashes."""
    same = reuse is not None and reuse.hash_context == hash_context(cfg, summaries)
    seen = reuse.files if reuse is not None and same else {}
    out: dict[str, tuple[str, str]] = {}
    for doc in kb.documents:
        if reuse is not None and doc.source_hash and seen.get(doc.file_path) == doc.source_hash:
            prev = [reuse.nodes.get(n.node_id) for n in doc.nodes]
            if all(p is not None and len(p) == 2 for p in prev):
                for n, p in zip(doc.nodes, prev, strict=True):
                    out[n.node_id] = (p[0], p[1])  # type: ignore[index]
                continue
        for n in doc.nodes:
            out[n.node_id] = node_hashes(n, cfg, summaries)
    return out


def hash_context(cfg: EngineConfig, summaries: Mapping[str, str] | None) -> str:
    """What node hashes depend on besides the file: text layout, tokenizer, summaries."""
    h = hashlib.sha256(
        f"{TEXT_LAYOUT}\x00{cfg.lexical.tokenizer_spec}\x00{cfg.index.content_chars}".encode()
    )
    for key in sorted(summaries or {}):
        h.update(f"\x00{key}\x00{(summaries or {})[key]}".encode())
    return h.hexdigest()[:16]


def file_hashes(kb: KnowledgeBase) -> dict[str, str]:
    """rel path -> source hash of every parsed file of the KB."""
    return {d.file_path: d.source_hash for d in kb.documents if d.source_hash}


def fingerprint(hashes: Mapping[str, Sequence[str]]) -> str:
    h = hashlib.sha256()
    for nid in sorted(hashes):
        h.update(f"{nid}\x00{hashes[nid][0]}\x00{hashes[nid][1]}\n".encode())
    return h.hexdigest()[:16]


def read_manifest(loc: Location) -> Manifest | None:
    text = loc.read_text(MANIFEST)
    if text is None:
        return None
    try:
        return Manifest.from_json(text)
    except (ValueError, TypeError) as exc:
        raise EngineError(
            f"{loc.uri}/{MANIFEST} is unreadable ({exc}); rebuild with `wikirag index --force`"
        ) from exc


def require_manifest(loc: Location, kb_hint: str = "DIR") -> Manifest:
    m = read_manifest(loc)
    if m is None:
        raise IndexMissingError(f"no index at {loc.uri}; run `wikirag index --kb {kb_hint}`")
    return m


def freshness(kb: KnowledgeBase, cfg: EngineConfig, manifest: Manifest | None) -> dict[str, Any]:
    """How many KB nodes are new / changed / deleted compared with the index manifest.

    With ``index.use_summaries`` the LLM summaries the index was built with (recorded in the
    manifest) are applied, so an unchanged chapter reads as unchanged.
    """
    used = manifest.summaries if manifest is not None and cfg.index.use_summaries else None
    hashes = kb_hashes(kb, cfg, used, manifest)
    indexed = manifest.nodes if manifest else {}
    new = [n for n in hashes if n not in indexed]
    changed = [n for n in hashes if n in indexed and list(hashes[n]) != list(indexed[n])]
    deleted = [n for n in indexed if n not in hashes]
    return {
        "new": len(new),
        "changed": len(changed),
        "deleted": len(deleted),
        "fresh": manifest is not None and not (new or changed or deleted),
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


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
        from engine.embedding import make_embedder

        embedder = make_embedder(cfg.embedding)
    loc = Location(index_uri, storage_options)
    with loc.exclusive():  # one builder at a time per index folder, across processes
        report = _build(
            kb,
            cfg,
            index_uri,
            storage_options,
            embedder,
            loc,
            progress,
            force,
            workers,
            ann_min_rows,
        )
    if drop_old:
        drop_stale_tables(index_uri, storage_options)
    report.seconds = time.perf_counter() - t0
    return report


@dataclass
class _Lexical:
    """BM25 term counts (rows in sorted id order) and the title/keyword term row counts."""

    ids: list[str]
    counts: sp.csr_matrix
    terms: list[str]
    title_terms: dict[str, int]
    crumb_counts: sp.csr_matrix  # the title field over ``crumb_terms`` (not yet aligned)
    crumb_terms: list[str]


def _build(
    kb: KnowledgeBase,
    cfg: EngineConfig,
    index_uri: str,
    storage_options: Mapping[str, str] | None,
    embedder: Embedder,
    loc: Location,
    progress: ProgressFn | None,
    force: bool,
    workers: int | None,
    ann_min_rows: int,
) -> IndexReport:
    sig = embedder.signature
    store = Store(index_uri, storage_options)
    report = IndexReport()
    old = previous_manifest(loc, store, sig, report)
    full = force or old is None or old.embedder_signature != sig
    report.full_rebuild = full

    summaries: dict[str, str] = {}
    if cfg.index.use_summaries:
        loaded = load_llm_summaries(loc)
        summaries = {
            summary_key(n): loaded[summary_key(n)]
            for n in kb.nodes.values()
            if summary_key(n) in loaded
        }
        if not summaries:
            report.warnings.append(
                f"index.use_summaries is on but {loc.uri}/{SUMMARIES} has no summaries for "
                "this KB; chapters were embedded with their own first sentences"
            )
    nodes = kb.nodes
    prev = {} if old is None else old.nodes
    if full:
        # Every row is rebuilt: hashes are computed beside the rows (in the workers).
        added = [n for n in nodes if n not in prev]
        report.added, report.removed = len(added), len([n for n in prev if n not in nodes])
        report.updated, report.unchanged = len(nodes) - len(added), 0
        table_name = new_table_name()
        tbl = store.create_table(table_name, sig.dims)
        hashes, lexical = _write_full(tbl, kb, cfg, embedder, summaries, progress, workers)
        report.embedded = len(hashes)
    else:
        assert old is not None
        hashes = kb_hashes(kb, cfg, summaries, old)
        added = [n for n in nodes if n not in prev]
        removed = [n for n in prev if n not in nodes]
        changed = [n for n in nodes if n in prev and list(prev[n]) != list(hashes[n])]
        report.added, report.removed, report.updated = len(added), len(removed), len(changed)
        report.unchanged = len(nodes) - len(added) - len(changed)
        if not (added or removed or changed):
            caches_ok = all(
                loc.read_bytes(name) is not None
                for name in (old.lexical_file, old.vocab_terms_file, old.vocab_vectors_file)
                if name
            )
            if caches_ok:
                current = old
                if old.files != file_hashes(kb):  # touched files, same chapters: remember them
                    current = replace(current, files=file_hashes(kb), updated_at=_now())
                if not old.vector_index and 0 < ann_min_rows <= len(prev):
                    # The threshold was lowered (or turned on) for a KB that did not change.
                    tbl = store.open_table(old.table)
                    if tbl.version != old.version:
                        tbl.restore(old.version)  # a crashed update's versions: not ours
                    if progress:
                        progress(0, 1, "vector index")
                    desc = create_vector_index(tbl, len(prev), sig.dims)
                    current = replace(
                        current, version=int(tbl.version), vector_index=desc, updated_at=_now()
                    )
                if current is not old:
                    loc.write_text(MANIFEST, current.to_json())
                report.table, report.version, report.rows = old.table, current.version, len(prev)
                return report
        table_name = old.table
        tbl = store.open_table(table_name)
        if tbl.version != old.version:
            # A crashed update left versions past the manifest's: start from the manifest's.
            tbl.restore(old.version)
        stale = changed + removed
        old_titles = _stored_title_terms(tbl, stale)
        batch, report.embedded = _write_incremental(
            tbl, kb, cfg, embedder, hashes, summaries, prev, added, changed, removed, progress
        )
        lexical = _patched_lexical(
            loc, store, table_name, old, stale, old_titles, batch, cfg.lexical.tokenizer_spec
        )
    version = commit_build(
        loc,
        tbl,
        table_name,
        cfg,
        embedder,
        hashes,
        lexical,
        summaries,
        file_hashes(kb),
        old,
        full=full,
        force=force,
        ann_min_rows=ann_min_rows,
        progress=progress,
    )
    report.table, report.version, report.rows = table_name, version, len(lexical.ids)
    return report


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
        old = None
    if old is not None and old.embedder_signature != sig:
        was = old.embedder_signature
        report.warnings.append(
            f"embedder changed ({was.provider}/{was.model}/{was.dims} -> "
            f"{sig.provider}/{sig.model}/{sig.dims}): full rebuild, every chapter re-embedded"
        )
    return old


def lexical_of(batches: Iterable[RowBatch]) -> _Lexical:
    """The BM25 counts and title/keyword term counts of row batches (any order)."""
    counts = _CountsBuilder()
    for batch in batches:
        counts.add(batch)
    return counts.result()


def commit_build(
    loc: Location,
    tbl: Any,
    table_name: str,
    cfg: EngineConfig,
    embedder: Embedder,
    hashes: Mapping[str, tuple[str, str]],
    lexical: _Lexical,
    summaries: Mapping[str, str],
    files: dict[str, str],
    old: Manifest | None,
    *,
    full: bool,
    force: bool,
    ann_min_rows: int | None,
    progress: ProgressFn | None,
) -> int:
    """After the rows: vector index, BM25 and vocabulary caches, then the manifest switch.

    Returns the table version the new manifest names.
    """
    sig = embedder.signature
    if ann_min_rows is None:  # the Ray build follows the config like the local one
        ann_min_rows = cfg.index.ann_min_rows
    vector_index = "" if full or old is None else old.vector_index
    if not vector_index and ann_min_rows > 0 and len(lexical.ids) >= ann_min_rows:
        # Rows an update adds later are searched exactly by LanceDB beside the index.
        if progress:
            progress(0, 1, "vector index")
        vector_index = create_vector_index(tbl, len(lexical.ids), sig.dims)
    version = int(tbl.version)
    build_id = f"{table_name}_v{version}"

    prev_vocab = _load_vocab(loc, old) if old is not None and not force else None
    lexical_file, crumbs_file, terms_file, vectors_file = _write_caches(
        loc, build_id, lexical, embedder, prev_vocab, progress
    )
    now = _now()
    manifest = Manifest(
        table=table_name,
        version=version,
        signature=sig.to_dict(),
        tokenizer=cfg.lexical.tokenizer_spec,
        content_chars=cfg.index.content_chars,
        nodes=dict(hashes),  # type: ignore[arg-type]  # pairs: written as JSON lists
        kb_fingerprint=fingerprint(hashes),
        created_at=now if full or old is None else old.created_at,
        updated_at=now,
        build_id=build_id,
        lexical_file=lexical_file,
        crumbs_file=crumbs_file,
        vocab_terms_file=terms_file,
        vocab_vectors_file=vectors_file,
        summaries=dict(summaries),
        files=files,
        hash_context=hash_context(cfg, summaries),
        title_terms=lexical.title_terms,
        vector_index=vector_index,
    )
    loc.write_text(MANIFEST, manifest.to_json())  # the switch: atomic
    _drop_stale_files(loc, manifest)
    return version


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
        store = Store(index_uri, storage_options)
        stale = [t for t in store.table_names() if t.startswith(TABLE_PREFIX) and t != m.table]
        for t in stale:
            store.drop_table(t)
        return len(stale)


# Below this many nodes a full build tokenizes in this process: starting worker processes
# (each imports the engine and loads jieba's dictionary) costs more than it saves.
POOL_MIN_NODES = 16_384
ROW_BATCH = 2048  # nodes per worker task and per table append: bounds the build's memory


def _worker_count(n_nodes: int, workers: int | None) -> int:
    if workers is not None:
        return max(1, workers)
    return (os.cpu_count() or 1) if n_nodes >= POOL_MIN_NODES else 1


def _row_batches(
    nodes: Sequence[Node],
    cfg: EngineConfig,
    summaries: Mapping[str, str],
    workers: int,
) -> Iterator[RowBatch]:
    """``build_rows`` over consecutive batches, in order; in worker processes if workers > 1.

    At most ``2 * workers`` batches are in flight, so memory holds a few batches, not the KB's
    rows. If the workers cannot run (e.g. a script without the ``if __name__ ==
    "__main__":`` guard that spawned processes need), the rest is built in this process.
    """
    starts = range(0, len(nodes), ROW_BATCH)

    def args(start: int) -> tuple[Any, ...]:
        chunk = list(nodes[start : start + ROW_BATCH])
        own = {
            summary_key(n): summaries[summary_key(n)] for n in chunk if summary_key(n) in summaries
        }
        return (chunk, cfg, own)

    done = 0  # batches yielded so far
    if workers > 1:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        # spawn, not fork: this process already runs LanceDB's threads.
        ex = ProcessPoolExecutor(
            workers, mp_context=multiprocessing.get_context("spawn"), initializer=warm_up
        )
        try:
            pending: deque[Any] = deque()
            queued = iter(starts)
            for start in itertools.islice(queued, 2 * workers):
                pending.append(ex.submit(build_rows, *args(start)))
            while pending:
                batch = pending.popleft().result()
                nxt = next(queued, None)
                if nxt is not None:
                    pending.append(ex.submit(build_rows, *args(nxt)))
                yield batch
                done += 1
        except BrokenProcessPool:
            pass  # fall through: build the remaining batches here
        finally:
            ex.shutdown(wait=True, cancel_futures=True)
    for start in list(starts)[done:]:
        yield build_rows(*args(start))


class _CountsBuilder:
    """Stacks batches' count matrices into one over a shared term list (rows in KB order)."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.index: dict[str, int] = {}
        self.parts: list[sp.csr_matrix] = []
        self.title_terms: Counter[str] = Counter()
        self.crumb_index: dict[str, int] = {}
        self.crumb_parts: list[Any] = []

    def add(self, batch: RowBatch) -> None:
        self.crumb_parts.append(_remapped(batch.crumb_counts, batch.crumb_terms, self.crumb_index))
        col = np.fromiter(
            (self.index.setdefault(t, len(self.index)) for t in batch.terms),
            dtype=np.int64,
            count=len(batch.terms),
        )
        c = batch.counts
        self.parts.append((c.data, col[c.indices] if len(col) else c.indices, c.indptr))
        self.ids.extend(batch.ids)
        self.title_terms.update(batch.title_terms)

    def result(self) -> _Lexical:
        crumbs = _stacked(self.crumb_parts, len(self.crumb_index))
        self.crumb_parts = []
        width = len(self.index)
        mats = [sp.csr_matrix((d, i, p), shape=(len(p) - 1, width)) for d, i, p in self.parts]
        self.parts = []
        stacked = (
            sp.vstack(mats, format="csr") if mats else sp.csr_matrix((0, width), dtype=np.float64)
        )
        del mats
        order = sorted(range(len(self.ids)), key=self.ids.__getitem__)
        take = np.array(order, dtype=np.int64)
        counts = stacked[take]
        counts.sort_indices()
        crumbs = crumbs[take]
        crumbs.sort_indices()
        return _Lexical(
            ids=[self.ids[i] for i in order],
            counts=counts,
            terms=list(self.index),
            title_terms=dict(sorted(self.title_terms.items())),
            crumb_counts=crumbs,
            crumb_terms=list(self.crumb_index),
        )


def _remapped(c: sp.csr_matrix, terms: Sequence[str], index: dict[str, int]) -> Any:
    col = np.fromiter(
        (index.setdefault(t, len(index)) for t in terms), dtype=np.int64, count=len(terms)
    )
    return (c.data, col[c.indices] if len(col) else c.indices, c.indptr)


def _stacked(parts: list[Any], width: int) -> sp.csr_matrix:
    mats = [sp.csr_matrix((d, i, p), shape=(len(p) - 1, width)) for d, i, p in parts]
    if not mats:
        return sp.csr_matrix((0, width), dtype=np.float64)
    return sp.vstack(mats, format="csr")


def _write_full(
    tbl: Any,
    kb: KnowledgeBase,
    cfg: EngineConfig,
    embedder: Embedder,
    summaries: Mapping[str, str],
    progress: ProgressFn | None,
    workers: int | None,
) -> tuple[dict[str, tuple[str, str]], _Lexical]:
    nodes = list(kb.nodes.values())
    batch = max(1, cfg.embedding.batch_size)
    hashes: dict[str, tuple[str, str]] = {}
    counts = _CountsBuilder()
    done = 0
    for rows in _row_batches(nodes, cfg, summaries, _worker_count(len(nodes), workers)):
        texts = rows.embed_texts
        parts = [
            np.asarray(embedder.embed_documents(texts[s : s + batch]), dtype=np.float32)
            for s in range(0, len(texts), batch)
        ]
        vecs = np.concatenate(parts) if parts else np.zeros((0, embedder.signature.dims))
        Store.add_columns(tbl, rows.columns, vecs)
        ids = rows.ids
        hashes.update(
            zip(
                ids,
                zip(
                    rows.columns.column("content_hash").to_pylist(),
                    rows.columns.column("row_hash").to_pylist(),
                    strict=True,
                ),
                strict=True,
            )
        )
        counts.add(rows)
        done += len(ids)
        if progress:
            progress(done, len(nodes), "embed")
    if progress:
        progress(0, 1, "lexical")
    return hashes, counts.result()


def _write_incremental(
    tbl: Any,
    kb: KnowledgeBase,
    cfg: EngineConfig,
    embedder: Embedder,
    hashes: Mapping[str, tuple[str, str]],
    summaries: Mapping[str, str],
    prev: Mapping[str, Sequence[str]],
    added: list[str],
    changed: list[str],
    removed: list[str],
    progress: ProgressFn | None,
) -> tuple[RowBatch, int]:
    """Upsert new and changed rows, delete removed ones; returns the rows and how many were
    embedded."""
    todo = added + changed
    rows = build_rows([kb.nodes[n] for n in todo], cfg, summaries, [hashes[n] for n in todo])
    texts = dict(zip(todo, rows.embed_texts, strict=True))
    # Embed first, write after: a failing embedder leaves the table untouched.
    to_embed = added + [n for n in changed if prev[n][0] != hashes[n][0]]
    reuse = [n for n in changed if prev[n][0] == hashes[n][0]]
    vectors: dict[str, np.ndarray] = {}
    batch = max(1, cfg.embedding.batch_size)
    for start in range(0, len(to_embed), batch):
        chunk = to_embed[start : start + batch]
        vecs = embedder.embed_documents([texts[n] for n in chunk])
        vectors.update(zip(chunk, vecs, strict=True))
        if progress:
            progress(min(start + batch, len(to_embed)), len(to_embed), "embed")
    for start in range(0, len(reuse), 500):
        part = reuse[start : start + 500]
        where = f"id IN ({', '.join(sql_str(i) for i in part)})"
        got = Store.read(tbl, ["id", "vector"], where)
        vectors.update(zip(got.column("id").to_pylist(), vectors_of(got), strict=True))
    dims = embedder.signature.dims
    mat = (
        np.stack([np.asarray(vectors[n], np.float32) for n in todo])
        if todo
        else np.zeros((0, dims))
    )
    for start in range(0, len(todo), ROW_BATCH):
        Store.upsert_columns(
            tbl, rows.columns.slice(start, ROW_BATCH), mat[start : start + ROW_BATCH]
        )
        if progress:
            progress(min(start + ROW_BATCH, len(todo)), len(todo), "write")
    Store.delete_ids(tbl, removed)
    return rows, len(to_embed)


def _stored_title_terms(tbl: Any, ids: Sequence[str]) -> Counter[str]:
    """Title/keyword term row counts of the stored rows ``ids`` (before they change)."""
    out: Counter[str] = Counter()
    memo: dict[str, list[str]] = {}
    for start in range(0, len(ids), 500):
        where = f"id IN ({', '.join(sql_str(i) for i in ids[start : start + 500])})"
        got = Store.read(tbl, ["title", "keywords"], where)
        for title, kws in zip(
            got.column("title").to_pylist(), got.column("keywords").to_pylist(), strict=True
        ):
            out.update(title_terms_of(title, kws, memo))
    return out


def _patched_lexical(
    loc: Location,
    store: Store,
    table_name: str,
    old: Manifest,
    stale: Sequence[str],
    old_titles: Counter[str],
    rows: RowBatch,
    tokenizer: str,
) -> _Lexical:
    """The previous BM25 counts with the stale rows replaced (or, without them, recounted)."""
    payload = loc.read_bytes(old.lexical_file) if old.lexical_file else None
    crumbs = _load_counts(loc.read_bytes(old.crumbs_file)) if old.crumbs_file else None
    if payload is None or old.title_terms is None or crumbs is None:
        return _lexical_from_table(store, table_name, tokenizer)
    ids, body = split_lexical_payload(payload)
    prev = SparseBM25.from_bytes(body, k1=1.5, b=0.75)
    if prev.n_docs != len(ids) or len(ids) != len(old.nodes) or crumbs[0].shape[0] != len(ids):
        return _lexical_from_table(store, table_name, tokenizer)
    _, crumb_counts, crumb_terms = replace_rows(
        ids, crumbs[0], crumbs[1], stale, rows.ids, rows.crumb_counts, rows.crumb_terms
    )
    new_ids, counts, terms = replace_rows(
        ids, prev.counts, prev.terms, stale, rows.ids, rows.counts, rows.terms
    )
    titles = Counter(old.title_terms)
    titles.subtract(old_titles)
    titles.update(rows.title_terms)
    kept = {t: n for t, n in sorted(titles.items()) if n > 0}
    return _Lexical(new_ids, counts, terms, kept, crumb_counts, crumb_terms)


def _lexical_from_table(store: Store, table_name: str, tokenizer: str) -> _Lexical:
    """Count everything again from the table's rows (an index written before the caches
    recorded what an update needs)."""
    tbl = store.open_table(table_name)
    data = Store.read(tbl, ["id", "tokens", "title", "keywords", "breadcrumb"])
    raw = data.column("id").to_pylist()
    order = sorted(range(len(raw)), key=raw.__getitem__)
    tokens = data.column("tokens").to_pylist()
    counts, terms = count_matrix((tokens[i] or "").split() for i in order)
    titles: Counter[str] = Counter()
    memo: dict[str, list[str]] = {}
    for title, kws in zip(
        data.column("title").to_pylist(), data.column("keywords").to_pylist(), strict=True
    ):
        titles.update(title_terms_of(title, kws, memo))
    crumbs_col = data.column("breadcrumb").to_pylist()
    crumb_counts, crumb_terms = count_matrix(
        title_tokens([json.loads(crumbs_col[i] or "[]") for i in order], tokenizer)
    )
    return _Lexical(
        [raw[i] for i in order],
        counts,
        terms,
        dict(sorted(titles.items())),
        crumb_counts,
        crumb_terms,
    )


def _counts_bytes(counts: sp.csr_matrix, terms: Sequence[str]) -> bytes:
    buf = io.BytesIO()
    np.savez(
        buf,
        data=counts.data,
        indices=counts.indices,
        indptr=counts.indptr,
        shape=np.array(counts.shape, dtype=np.int64),
        terms=np.frombuffer(json.dumps(list(terms), ensure_ascii=False).encode(), np.uint8),
    )
    return buf.getvalue()


def _load_counts(payload: bytes | None) -> tuple[sp.csr_matrix, list[str]] | None:
    if payload is None:
        return None
    try:
        z = np.load(io.BytesIO(payload))
        shape = tuple(int(x) for x in z["shape"])
        counts = sp.csr_matrix((z["data"], z["indices"], z["indptr"]), shape=shape)
        return counts, json.loads(z["terms"].tobytes().decode())
    except (ValueError, KeyError, OSError):
        return None


def _aligned(counts: sp.csr_matrix, terms: Sequence[str], to_terms: Sequence[str]) -> sp.csr_matrix:
    """``counts`` over ``to_terms``' columns; terms not in ``to_terms`` are dropped (as
    ``lexical.aligned_counts`` does for the title field)."""
    index = {t: i for i, t in enumerate(to_terms)}
    col = np.array([index.get(t, -1) for t in terms], dtype=np.int64)
    c = counts.tocoo()
    cols = col[c.col] if len(col) else c.col
    keep = cols >= 0
    out = sp.coo_matrix(
        (c.data[keep], (c.row[keep], cols[keep])), shape=(counts.shape[0], len(to_terms))
    ).tocsr()
    out.sum_duplicates()
    out.sort_indices()
    return out


def _load_vocab(loc: Location, m: Manifest) -> Vocabulary | None:
    if not (m.vocab_terms_file and m.vocab_vectors_file):
        return None
    terms = loc.read_text(m.vocab_terms_file)
    vecs = loc.read_bytes(m.vocab_vectors_file)
    if terms is None or vecs is None:
        return None
    try:
        return Vocabulary.from_files(terms, vecs)
    except (ValueError, KeyError, OSError):
        return None


def _write_caches(
    loc: Location,
    build_id: str,
    lexical: _Lexical,
    embedder: Embedder,
    prev_vocab: Vocabulary | None,
    progress: ProgressFn | None,
) -> tuple[str, str, str, str]:
    """Save the BM25 counts and the expansion vocabulary (df from the counts) for a build."""
    title = _aligned(lexical.crumb_counts, lexical.crumb_terms, lexical.terms)
    bm25 = SparseBM25(counts=lexical.counts, terms=lexical.terms, title_counts=title)
    lexical_file = f"lexical_{build_id}.npz"
    loc.write_bytes(lexical_file, _with_ids(bm25.to_bytes(), lexical.ids))
    crumbs_file = f"lexical_{build_id}.crumbs.npz"
    loc.write_bytes(crumbs_file, _counts_bytes(lexical.crumb_counts, lexical.crumb_terms))
    if progress:
        progress(1, 1, "lexical")
    df = np.bincount(lexical.counts.indices, minlength=len(lexical.terms))
    vocab_terms = vocabulary_from_df(
        dict(zip(lexical.terms, df.tolist(), strict=True)), lexical.title_terms
    )
    vocab = embed_vocabulary(
        vocab_terms,
        embedder,
        reuse=prev_vocab,
        progress=(lambda d, t: progress(d, t, "vocab")) if progress else None,
    )
    terms_file = f"vocab_{build_id}.json"
    vectors_file = f"vocab_{build_id}.npy"
    loc.write_text(terms_file, vocab.terms_json())
    loc.write_bytes(vectors_file, vocab.vectors_npy())
    return lexical_file, crumbs_file, terms_file, vectors_file


def _with_ids(npz_payload: bytes, ids: list[str]) -> bytes:
    """Prefix the BM25 payload with the row ids it is aligned to (one JSON line)."""
    return json.dumps(ids, ensure_ascii=False).encode("utf-8") + b"\n" + npz_payload


def split_lexical_payload(payload: bytes) -> tuple[list[str], bytes]:
    head, _, body = payload.partition(b"\n")
    return json.loads(head.decode("utf-8")), body


def _drop_stale_files(loc: Location, m: Manifest) -> None:
    keep = {MANIFEST, m.lexical_file, m.crumbs_file, m.vocab_terms_file, m.vocab_vectors_file}
    for name in loc.names():
        if name.startswith(("lexical_", "vocab_")) and name not in keep:
            loc.delete(name)
