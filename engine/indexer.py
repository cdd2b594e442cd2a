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
import json
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from engine.config import EngineConfig
from engine.errors import EngineError, IndexMissingError
from engine.expansion import Vocabulary, embed_vocabulary, vocabulary_terms
from engine.lexical import SparseBM25, aligned_counts, count_matrix, title_tokens, tokenize
from engine.store import TABLE_PREFIX, Location, Store, vectors_of
from engine.tree import KnowledgeBase, Node
from engine.types import Embedder, EmbedderSignature

MANIFEST = "manifest.json"
SUMMARIES = "summaries.json"  # LLM chapter summaries (workbench/summaries.py writes it)
MANIFEST_FORMAT = 1
# Bump when the embedded/lexical text layout changes: every row hash changes with it.
TEXT_LAYOUT = "v1"

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
    vocab_terms_file: str = ""
    vocab_vectors_file: str = ""
    summaries: dict[str, str] = field(default_factory=dict)  # LLM summaries used, by content hash
    format: int = MANIFEST_FORMAT

    @property
    def embedder_signature(self) -> EmbedderSignature:
        return EmbedderSignature(**self.signature)

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, indent=1, sort_keys=True)

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


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:20]


def embed_text(node: Node, content_chars: int, summary: str | None = None) -> str:
    """The text a chapter is embedded as (path, breadcrumb title, summary, head of content).

    ``summary`` replaces the node's own (extractive) summary: an LLM summary, see
    ``index.use_summaries``.
    """
    return (
        f"path: {node.file_path}\n"
        f"title: {' > '.join(node.breadcrumb)}\n"
        f"summary: {node.summary if summary is None else summary}\n"
        f"{node.content[:content_chars]}"
    )


def lexical_text(node: Node, summary: str | None = None) -> str:
    """The text BM25 sees: the same header as the embedded text, with the whole content."""
    return (
        f"path: {node.file_path}\n"
        f"title: {' > '.join(node.breadcrumb)}\n"
        f"summary: {node.summary if summary is None else summary}\n"
        f"{node.content}"
    )


def summary_key(node: Node) -> str:
    """The key of a chapter in the LLM summary cache (workbench/summaries.py): its content hash."""
    return node.content_hash or hashlib.sha256(node.content.encode("utf-8")).hexdigest()[:16]


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


def _summary(node: Node, summaries: Mapping[str, str] | None) -> str | None:
    return summaries.get(summary_key(node)) if summaries else None


def _meta(node: Node) -> dict[str, Any]:
    return {
        "doc_id": node.doc_id,
        "title": node.title,
        "level": int(node.level),
        "ordinal": int(node.ordinal),
        "parent_id": node.parent_id,
        "breadcrumb": json.dumps(list(node.breadcrumb), ensure_ascii=False),
        "file_path": node.file_path,
        "line": int(node.line),
        "anchor": node.anchor,
        "category": node.category,
        "priority": node.priority,
        "doc_type": node.doc_type,
        "keywords": list(node.keywords),
    }


def node_hashes(
    node: Node, cfg: EngineConfig, summaries: Mapping[str, str] | None = None
) -> tuple[str, str]:
    """(hash of the embedded text, hash of everything else the row holds)."""
    summary = _summary(node, summaries)
    meta = json.dumps(_meta(node), ensure_ascii=False, sort_keys=True, default=str)
    row = "\x00".join([TEXT_LAYOUT, cfg.lexical.tokenizer_spec, lexical_text(node, summary), meta])
    return _sha(embed_text(node, cfg.index.content_chars, summary)), _sha(row)


def kb_hashes(
    kb: KnowledgeBase, cfg: EngineConfig, summaries: Mapping[str, str] | None = None
) -> dict[str, tuple[str, str]]:
    return {nid: node_hashes(n, cfg, summaries) for nid, n in kb.nodes.items()}


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
    hashes = kb_hashes(kb, cfg, used)
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


def _row(
    node: Node,
    vector: np.ndarray,
    cfg: EngineConfig,
    hashes: tuple[str, str],
    summaries: Mapping[str, str],
) -> dict:
    summary = _summary(node, summaries)
    tokens = tokenize(lexical_text(node, summary), cfg.lexical.tokenizer_spec)
    return {
        "id": node.node_id,
        "vector": np.asarray(vector, dtype=np.float32),
        "text": embed_text(node, cfg.index.content_chars, summary),
        "tokens": " ".join(tokens),
        **_meta(node),
        "content_hash": hashes[0],
        "row_hash": hashes[1],
    }


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
) -> IndexReport:
    """Create or update the index of ``kb`` at ``index_uri`` (see the module docstring).

    ``progress(done, total, stage)`` is called per batch; stages: embed, write, lexical,
    vocab. ``drop_old=False`` keeps superseded tables (the caller drops them later with
    ``drop_stale_tables``, e.g. once its readers have switched).
    """
    t0 = time.perf_counter()
    if embedder is None:
        from engine.embedding import make_embedder

        embedder = make_embedder(cfg.embedding)
    loc = Location(index_uri, storage_options)
    with loc.exclusive():  # one builder at a time per index folder, across processes
        report = _build(kb, cfg, index_uri, storage_options, embedder, loc, progress, force)
    if drop_old:
        drop_stale_tables(index_uri, storage_options)
    report.seconds = time.perf_counter() - t0
    return report


def _build(
    kb: KnowledgeBase,
    cfg: EngineConfig,
    index_uri: str,
    storage_options: Mapping[str, str] | None,
    embedder: Embedder,
    loc: Location,
    progress: ProgressFn | None,
    force: bool,
) -> IndexReport:
    sig = embedder.signature
    store = Store(index_uri, storage_options)
    report = IndexReport()
    old = read_manifest(loc)
    tables = set(store.table_names())
    if old is not None and old.table not in tables:
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
    full = force or old is None or old.embedder_signature != sig
    report.full_rebuild = full

    summaries = load_llm_summaries(loc) if cfg.index.use_summaries else {}
    summaries = {
        summary_key(n): summaries[summary_key(n)]
        for n in kb.nodes.values()
        if summary_key(n) in summaries
    }
    if cfg.index.use_summaries and not summaries:
        report.warnings.append(
            f"index.use_summaries is on but {loc.uri}/{SUMMARIES} has no summaries for this "
            "KB; chapters were embedded with their own first sentences"
        )
    hashes = kb_hashes(kb, cfg, summaries)
    nodes = kb.nodes
    prev = {} if old is None else old.nodes
    added = [n for n in nodes if n not in prev]
    removed = [n for n in prev if n not in nodes]
    changed = [n for n in nodes if n in prev and list(prev[n]) != list(hashes[n])]
    report.added, report.removed, report.updated = len(added), len(removed), len(changed)
    report.unchanged = len(nodes) - len(added) - len(changed)
    if full:  # everything is (re-)embedded: nodes kept from the old index count as updated
        report.updated, report.unchanged = len(nodes) - len(added), 0

    if not full and old is not None and not (added or removed or changed):
        caches_ok = all(
            loc.read_bytes(name) is not None
            for name in (old.lexical_file, old.vocab_terms_file, old.vocab_vectors_file)
            if name
        )
        if caches_ok:
            report.table, report.version, report.rows = old.table, old.version, len(prev)
            return report

    if full:
        table_name = f"{TABLE_PREFIX}{datetime.now(UTC):%Y%m%dT%H%M%S%f}_{secrets.token_hex(2)}"
        tbl = store.create_table(table_name, sig.dims)
        report.embedded = _write_full(tbl, kb, cfg, embedder, hashes, summaries, progress)
    else:
        assert old is not None
        table_name = old.table
        tbl = store.open_table(table_name)
        if tbl.version != old.version:
            # A crashed update left versions past the manifest's: start from the manifest's.
            tbl.restore(old.version)
        report.embedded = _write_incremental(
            tbl, kb, cfg, embedder, hashes, summaries, prev, added, changed, removed, progress
        )
    version = int(tbl.version)
    build_id = f"{table_name}_v{version}"

    prev_vocab = _load_vocab(loc, old) if old is not None and not force else None
    lexical_file, terms_file, vectors_file, n_rows = _write_caches(
        loc,
        store,
        table_name,
        version,
        build_id,
        kb,
        embedder,
        prev_vocab,
        progress,
        tokenizer=cfg.lexical.tokenizer_spec,
    )
    now = _now()
    manifest = Manifest(
        table=table_name,
        version=version,
        signature=sig.to_dict(),
        tokenizer=cfg.lexical.tokenizer_spec,
        content_chars=cfg.index.content_chars,
        nodes={n: list(h) for n, h in hashes.items()},
        kb_fingerprint=fingerprint(hashes),
        created_at=now if full or old is None else old.created_at,
        updated_at=now,
        build_id=build_id,
        lexical_file=lexical_file,
        vocab_terms_file=terms_file,
        vocab_vectors_file=vectors_file,
        summaries=summaries,
    )
    loc.write_text(MANIFEST, manifest.to_json())  # the switch: atomic
    _drop_stale_files(loc, manifest)
    report.table, report.version, report.rows = table_name, version, n_rows
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
        store = Store(index_uri, storage_options)
        stale = [t for t in store.table_names() if t.startswith(TABLE_PREFIX) and t != m.table]
        for t in stale:
            store.drop_table(t)
        return len(stale)


def _write_full(
    tbl: Any,
    kb: KnowledgeBase,
    cfg: EngineConfig,
    embedder: Embedder,
    hashes: Mapping[str, tuple[str, str]],
    summaries: Mapping[str, str],
    progress: ProgressFn | None,
    write_every: int = 2048,
) -> int:
    ids = list(kb.nodes)
    batch = max(1, cfg.embedding.batch_size)
    pending: list[dict] = []
    for start in range(0, len(ids), batch):
        chunk = [kb.nodes[n] for n in ids[start : start + batch]]
        vecs = embedder.embed_documents(
            [embed_text(n, cfg.index.content_chars, _summary(n, summaries)) for n in chunk]
        )
        pending.extend(
            _row(n, v, cfg, hashes[n.node_id], summaries) for n, v in zip(chunk, vecs, strict=True)
        )
        if len(pending) >= write_every:
            Store.add(tbl, pending)
            pending = []
        if progress:
            progress(min(start + batch, len(ids)), len(ids), "embed")
    Store.add(tbl, pending)
    return len(ids)


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
) -> int:
    # Embed first, write after: a failing embedder leaves the table untouched.
    to_embed = added + [n for n in changed if prev[n][0] != hashes[n][0]]
    reuse = [n for n in changed if prev[n][0] == hashes[n][0]]
    vectors: dict[str, np.ndarray] = {}
    batch = max(1, cfg.embedding.batch_size)
    for start in range(0, len(to_embed), batch):
        chunk = to_embed[start : start + batch]
        vecs = embedder.embed_documents(
            [
                embed_text(kb.nodes[n], cfg.index.content_chars, _summary(kb.nodes[n], summaries))
                for n in chunk
            ]
        )
        vectors.update(zip(chunk, vecs, strict=True))
        if progress:
            progress(min(start + batch, len(to_embed)), len(to_embed), "embed")
    if reuse:
        from engine.store import sql_str

        for start in range(0, len(reuse), 500):
            part = reuse[start : start + 500]
            where = f"id IN ({', '.join(sql_str(i) for i in part)})"
            got = Store.read(tbl, ["id", "vector"], where)
            vectors.update(zip(got.column("id").to_pylist(), vectors_of(got), strict=True))
    rows = [_row(kb.nodes[n], vectors[n], cfg, hashes[n], summaries) for n in to_embed + reuse]
    for start in range(0, len(rows), 2048):
        Store.upsert(tbl, rows[start : start + 2048])
        if progress:
            progress(min(start + 2048, len(rows)), len(rows), "write")
    Store.delete_ids(tbl, removed)
    return len(to_embed)


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
    store: Store,
    table_name: str,
    version: int,
    build_id: str,
    kb: KnowledgeBase,
    embedder: Embedder,
    prev_vocab: Vocabulary | None,
    progress: ProgressFn | None,
    tokenizer: str = "jieba-search",
) -> tuple[str, str, str, int]:
    """BM25 counts (body and title field) and the expansion vocabulary, rebuilt from the
    table's token and breadcrumb columns."""
    tbl = store.open_table(table_name, version)
    data = Store.read(tbl, ["id", "tokens", "title", "keywords", "breadcrumb"])
    order = np.argsort(np.array(data.column("id").to_pylist(), dtype=object), kind="stable")
    ids = [data.column("id")[int(i)].as_py() for i in order]
    tokens_col = data.column("tokens").to_pylist()
    docs = [tokens_col[int(i)].split() if tokens_col[int(i)] else [] for i in order]
    if progress:
        progress(0, 1, "lexical")
    counts, terms = count_matrix(docs)
    crumbs_col = data.column("breadcrumb").to_pylist()
    crumbs = [json.loads(crumbs_col[int(i)] or "[]") for i in order]
    titles = aligned_counts(title_tokens(crumbs, tokenizer), terms)
    lexical = SparseBM25(counts=counts, terms=terms, title_counts=titles)
    lexical_file = f"lexical_{build_id}.npz"
    loc.write_bytes(lexical_file, _with_ids(lexical.to_bytes(), ids))
    if progress:
        progress(1, 1, "lexical")

    # Titles and keywords repeat across rows (every chapter carries its document's keywords):
    # segment each distinct string once. vocabulary_terms ignores order and repeats here.
    always: list[str] = []
    strings = dict.fromkeys(t or "" for t in data.column("title").to_pylist())
    for kws in data.column("keywords").to_pylist():
        strings.update(dict.fromkeys(kws or []))
    for text in strings:
        always.extend(tokenize(text))
    vocab_terms = vocabulary_terms(docs, always)
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
    return lexical_file, terms_file, vectors_file, len(ids)


def _with_ids(npz_payload: bytes, ids: list[str]) -> bytes:
    """Prefix the BM25 payload with the row ids it is aligned to (one JSON line)."""
    return json.dumps(ids, ensure_ascii=False).encode("utf-8") + b"\n" + npz_payload


def split_lexical_payload(payload: bytes) -> tuple[list[str], bytes]:
    head, _, body = payload.partition(b"\n")
    return json.loads(head.decode("utf-8")), body


def _drop_stale_files(loc: Location, m: Manifest) -> None:
    keep = {MANIFEST, m.lexical_file, m.vocab_terms_file, m.vocab_vectors_file}
    for name in loc.names():
        if name.startswith(("lexical_", "vocab_")) and name not in keep:
            loc.delete(name)
