"""Full index builds fanned out on a Ray cluster (``wikirag index --ray [ADDRESS]``).

The same index as ``indexer.build_index`` (same ids, hashes, tokens and BM25 counts;
vectors from the same embedder), with the per-chapter work done by Ray Data stages:

1. parse: Markdown bytes -> chapter trees (``tree.parse_document``), one task per batch of
   files; the driver reads the files, so a remote cluster needs no shared folder;
2. rows: texts, jieba tokens, hashes and metadata (``rows.build_rows``, as the workers of a
   single-process build run it), plus each row's BM25 term counts for the driver;
3. embed: the configured embedder in actors (the model loads once per actor);
4. write: the Lance table, by lance-ray, into the index folder or ``s3://`` prefix.

The driver then adds what needs the whole corpus, exactly as a single-process build does
(``indexer.commit_build``): BM25 counts, vocabulary, manifest switch. A Ray build is always
a full rebuild into a new table; an update of a few changed files is cheaper without Ray.

Ray is imported only here and only when called: without ``--ray`` nothing imports it.
"""

from __future__ import annotations

import dataclasses
import logging
import pickle
import re
import time
import warnings
from collections import Counter
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from engine.chapters import Document
from engine.config import EmbeddingConfig, EngineConfig
from engine.embedding import make_embedder
from engine.errors import EngineError
from engine.rows import RowBatch, build_rows, summary_key, title_terms
from engine.sparse_counts import from_row_term_lists, row_term_lists
from engine.term_counts import lexical_of
from engine.tree import markdown_entries, parse_document, within_boundary
from engine.types import Embedder

# engine.indexer and engine.store import lancedb: imported where the driver needs them, so
# Ray workers (which import this module for its stages) do not.
if TYPE_CHECKING:
    from engine.indexer import IndexReport
    from engine.types import ProgressFn

MISSING = (
    "--ray needs Ray and lance-ray: install the ray extra (pip install 'wikirag-workbench[ray]')"
)

# Files per parse task, documents per row task, rows per embedding call: big enough that
# Ray's per-task overhead (milliseconds) stays small beside the work.
FILES_PER_TASK = 256
DOCS_PER_TASK = 128
ROWS_PER_EMBED = 1024
_PASSAGE_TEXTS = "passage_texts"

# Columns the row stage adds for the driver; they are not written to the table.
_LIST_STR = pa.list_(pa.string())
_LIST_F64 = pa.list_(pa.float64())
EXTRA_FIELDS: tuple[tuple[str, pa.DataType], ...] = (
    ("bm25_terms", _LIST_STR),
    ("bm25_tf", _LIST_F64),
    ("crumb_terms", _LIST_STR),
    ("crumb_tf", _LIST_F64),
    ("title_terms", _LIST_STR),
)


def _require_ray() -> Any:
    try:
        import lance_ray  # noqa: F401  # checked here so the error names the extra
        import ray
    except ImportError as exc:
        raise EngineError(MISSING) from exc
    return ray


def connect(address: str) -> bool:
    """Join the cluster at ``address`` ("local": start one here) unless Ray already runs.

    Returns whether this call started the connection (so the caller shuts it down).
    """
    ray = _require_ray()
    if ray.is_initialized():
        return False
    try:
        with warnings.catch_warnings():
            # Ray starts its processes by fork+exec; lance(db) warns about any fork, but
            # an exec'd child shares none of its state.
            warnings.filterwarnings("ignore", message=".*fork", category=RuntimeWarning)
            warnings.filterwarnings("ignore", message=".*fork-safe", category=UserWarning)
            ray.init(
                address=address or "local",
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EngineError(
            f"cannot connect to the Ray cluster at {address!r} ({exc}); start it with "
            "`ray start --head`, or pass --ray with no address for a local one"
        ) from exc
    return True


# --- stages (module functions: Ray pickles them by reference; workers import this module) ---


def parse_stage(batch: pa.Table) -> pa.Table:
    """Files (rel, data) -> one row per file: its pickled document, hash and node ids.

    As ``tree.parse_kb``: a file with an error problem is kept out (``ok`` false).
    """
    out: dict[str, list[Any]] = {
        k: [] for k in ("rel", "ok", "source_hash", "doc", "node_ids", "summary_keys")
    }

    for rel, data in zip(
        batch.column("rel").to_pylist(), batch.column("data").to_pylist(), strict=True
    ):
        doc = parse_document(data, rel)
        ok = not any(p.severity == "error" for p in doc.problems)
        out["rel"].append(rel)
        out["ok"].append(ok)
        out["source_hash"].append(doc.source_hash)
        out["doc"].append(pickle.dumps(doc, protocol=pickle.HIGHEST_PROTOCOL) if ok else b"")
        out["node_ids"].append([n.node_id for n in doc.nodes] if ok else [])
        out["summary_keys"].append([summary_key(n) for n in doc.nodes] if ok else [])
    return pa.table(
        out,
        schema=pa.schema(
            [
                ("rel", pa.string()),
                ("ok", pa.bool_()),
                ("source_hash", pa.string()),
                ("doc", pa.binary()),
                ("node_ids", _LIST_STR),
                ("summary_keys", _LIST_STR),
            ]
        ),
    )


def row_stage(batch: pa.Table, cfg: EngineConfig, summaries: Mapping[str, str]) -> pa.Table:
    """Documents -> chapter rows (every column but the vector) plus the BM25 extras."""
    docs: list[Document] = [pickle.loads(b) for b in batch.column("doc").to_pylist() if b]
    nodes = [n for d in docs for n in d.nodes]
    rows = build_rows(nodes, cfg, summaries)
    body_terms, body_tf = row_term_lists(rows.counts, rows.terms)
    crumb_terms, crumb_tf = row_term_lists(rows.crumb_counts, rows.crumb_terms)
    memo: dict[str, list[str]] = {}
    titles = [sorted(title_terms(n, memo)) for n in nodes]
    table = rows.columns
    for (name, typ), values in zip(
        EXTRA_FIELDS, (body_terms, body_tf, crumb_terms, crumb_tf, titles), strict=True
    ):
        table = table.append_column(pa.field(name, typ), pa.array(values, type=typ))
    # What the embed stage turns into the passage vectors (not written to the table).
    return table.append_column(
        pa.field(_PASSAGE_TEXTS, _LIST_STR), pa.array(rows.passage_texts, type=_LIST_STR)
    )


class EmbedStage:
    """An actor holding one embedder: adds the "vector" column to row batches."""

    def __init__(self, embedding: EmbeddingConfig) -> None:
        if not embedding.workers:
            # Ray runs one actor per CPU it gives the embed stage: one text at a time each
            # (``embedding.workers`` 0 would start a thread per core in every actor).
            embedding = dataclasses.replace(embedding, workers=1)
        self.embedder = make_embedder(embedding)
        self.batch = max(1, embedding.batch_size)

    def __call__(self, table: pa.Table) -> pa.Table:
        texts = table.column("text").to_pylist()
        dims = self.embedder.signature.dims
        parts = [
            np.asarray(self.embedder.embed_documents(texts[s : s + self.batch]), np.float32)
            for s in range(0, len(texts), self.batch)
        ]
        mat = np.concatenate(parts) if parts else np.zeros((0, dims), np.float32)
        vec = pa.FixedSizeListArray.from_arrays(pa.array(mat.ravel(), pa.float32()), dims)
        from engine.store import PASSAGES, passage_array  # deferred: loads lancedb (~2 s)

        lists = table.column(_PASSAGE_TEXTS).to_pylist()
        flat = [t for texts in lists for t in texts]
        pmat = np.concatenate(
            [
                np.asarray(self.embedder.embed_documents(flat[s : s + self.batch]), np.float32)
                for s in range(0, len(flat), self.batch)
            ]
            or [np.zeros((0, dims), np.float32)]
        )
        ends = np.cumsum([len(texts) for texts in lists]).tolist()
        per_row = [pmat[end - len(texts) : end] for end, texts in zip(ends, lists, strict=True)]
        passages = passage_array(per_row, table.num_rows, dims)
        table = table.append_column(pa.field("vector", vec.type), vec)
        return table.append_column(pa.field(PASSAGES, passages.type), passages)


def _driver_batch(b: pa.Table) -> RowBatch:
    """A RowBatch with what the driver needs (ids, counts, title terms) from the extras."""
    counts, terms = from_row_term_lists(
        b.column("bm25_terms").to_pylist(), b.column("bm25_tf").to_pylist()
    )
    crumbs, crumb_terms = from_row_term_lists(
        b.column("crumb_terms").to_pylist(), b.column("crumb_tf").to_pylist()
    )
    titles: Counter[str] = Counter()
    for row in b.column("title_terms").to_pylist():
        titles.update(row)
    return RowBatch(
        columns=b.select(["id"]),
        counts=counts,
        terms=terms,
        title_terms=titles,
        embed_texts=[],
        passage_texts=[],
        crumb_counts=crumbs,
        crumb_terms=crumb_terms,
    )


def _one_line(exc: BaseException) -> EngineError:
    """A stage's failure as the engine error it raised (Ray wraps it with a remote traceback),
    or any other failure as one line."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and cur not in seen:
        seen.append(cur)
        cur = getattr(cur, "cause", None) or cur.__cause__
    for e in reversed(seen):
        if isinstance(e, EngineError) and not type(e).__module__.startswith("ray"):
            return e
    # Ray ships a worker's exception chain back as text: the engine error's own line.
    for e in seen:
        found = re.findall(r"^engine\.errors\.\w+: (.+)$", str(e), flags=re.MULTILINE)
        if found:
            return EngineError(found[-1])
    root = seen[-1]
    text = (str(root).strip().splitlines() or [""])[0][:300]
    return EngineError(
        f"the Ray build failed ({type(root).__name__}: {text}); the index was left as it was"
    )


def _table_uri(index_uri: str, table_name: str) -> str:
    """Where LanceDB keeps table ``table_name`` of the database at ``index_uri``."""
    from engine.store import is_local  # deferred: loads lancedb (~2 s)

    base = str(Path(index_uri).resolve()) if is_local(index_uri) else index_uri.rstrip("/")
    return f"{base}/{table_name}.lance"


def build_index_ray(
    kb_root: str | Path,
    cfg: EngineConfig,
    index_uri: str,
    address: str = "local",
    progress: ProgressFn | None = None,
    *,
    force: bool = False,
    embedder: Embedder | None = None,
    storage_options: Mapping[str, str] | None = None,
    drop_old: bool = True,
    embed_actors: int | None = None,
    ann_min_rows: int | None = None,
) -> IndexReport:
    """Build the index of the KB folder ``kb_root`` at ``index_uri`` on Ray; an IndexReport.

    ``address``: "local" starts Ray on this machine; "auto" or "ray://host:port" joins a
    cluster; a Ray already initialised in this process is used as it is (and left running).
    ``embed_actors``: embedder actors (default: half the cluster's CPUs, at least one).
    ``force`` only decides whether the previous vocabulary's vectors may be reused: every
    Ray build writes a new table.
    """
    from engine import indexer  # deferred: loads lancedb (~2 s)
    from engine.store import Location, Store, is_local  # deferred: loads lancedb (~2 s)

    ray = _require_ray()
    root = Path(kb_root)
    if not root.is_dir():
        raise EngineError(f"knowledge base folder {root} not found; pass --kb DIR")
    t0 = time.perf_counter()
    if embedder is None:
        embedder = make_embedder(cfg.embedding)
    sig = embedder.signature
    report = indexer.IndexReport(full_rebuild=True)
    if address not in ("", "local") and is_local(index_uri):
        report.warnings.append(
            f"--index {index_uri} is a local folder while Ray runs at {address}: the "
            "cluster's workers write the table there, so it must be a folder every node shares"
        )
    loc = Location(index_uri, storage_options)
    started = connect(address)
    try:
        with loc.exclusive():
            store = Store(index_uri, storage_options)
            old = indexer.previous_manifest(loc, store, sig, report)
            table_name = indexer.new_table_name()
            try:
                hashes, lexical, files, summaries = _run_pipeline(
                    ray, root, cfg, loc, store, table_name, sig.dims, embed_actors, progress
                )
            except Exception as exc:
                raise _one_line(exc) from exc
            prev = {} if old is None else old.nodes
            report.added = sum(1 for n in hashes if n not in prev)
            report.removed = sum(1 for n in prev if n not in hashes)
            report.updated, report.unchanged = len(hashes) - report.added, 0
            report.embedded = len(hashes)
            tbl = store.open_table(table_name)
            if tbl.count_rows() != len(hashes):
                raise EngineError(
                    f"the Ray build wrote {tbl.count_rows()} rows for {len(hashes)} chapters "
                    f"into {table_name}; the index was left as it was"
                )
            report.version = indexer.commit_build(
                loc,
                tbl,
                table_name,
                cfg,
                embedder,
                hashes,
                lexical,
                summaries,
                files,
                old,
                full=True,
                force=force,
                ann_min_rows=ann_min_rows,
                progress=progress,
            )
            report.table, report.rows = table_name, len(lexical.ids)
    finally:
        if started:
            ray.shutdown()
    if drop_old:
        indexer.drop_stale_tables(index_uri, storage_options)
    report.seconds = time.perf_counter() - t0
    return report


def _run_pipeline(
    ray: Any,
    root: Path,
    cfg: EngineConfig,
    loc: Any,
    store: Any,
    table_name: str,
    dims: int,
    embed_actors: int | None,
    progress: ProgressFn | None,
) -> tuple[dict[str, tuple[str, str]], Any, dict[str, str], dict[str, str]]:
    """Parse, rows, embed and write on Ray; then the driver's share of the manifest."""
    from engine.manifest import load_llm_summaries  # deferred: loads lancedb (~2 s)

    _quiet_ray_data(ray)

    def say(done: int, total: int, stage: str) -> None:
        if progress:
            progress(done, total, stage)

    parsed, files, keys = _parse_on_ray(ray, root, say)
    summaries: dict[str, str] = {}
    if cfg.index.use_summaries:
        loaded = load_llm_summaries(loc)
        summaries = {k: loaded[k] for k in sorted(keys) if k in loaded}
    say(0, len(files), "ray: rows + embed")
    rows = _rows_and_vectors_on_ray(ray, parsed, cfg, summaries, embed_actors)
    say(len(files), len(files), "ray: rows + embed")
    say(0, 1, "ray: write")
    _write_table(rows, store, _table_uri(str(loc.uri), table_name), dims)
    hashes: dict[str, tuple[str, str]] = {}
    say(0, 1, "lexical")
    lexical = lexical_of(_driver_batches(rows, hashes))
    return hashes, lexical, files, summaries


def _quiet_ray_data(ray: Any) -> None:
    ctx = ray.data.DataContext.get_current()
    # Rows in the KB's order, as a single-process build writes them.
    ctx.execution_options.preserve_order = True
    ctx.enable_progress_bars = False  # the caller's progress shows the stages instead
    if not logging.getLogger("ray.data").isEnabledFor(logging.DEBUG):
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # no INFO lines per dataset


def _parse_on_ray(ray: Any, root: Path, say: ProgressFn) -> tuple[Any, dict[str, str], set[str]]:
    """The parsed dataset, the source hash of each file kept, and its chapters' summary keys."""
    # The driver reads the files: workers of a remote cluster need not see the KB folder.
    # the same files parse_kb reads: links leaving the KB and oversized files are skipped
    paths = [Path(p) for _, p in within_boundary(root, markdown_entries(root))[0]]
    if not paths:
        raise EngineError(f"no Markdown files under {root}; nothing to index")
    items = [{"rel": p.relative_to(root).as_posix(), "data": p.read_bytes()} for p in paths]
    say(0, len(items), "ray: parse")
    parsed = (
        ray.data.from_items(items)
        .map_batches(parse_stage, batch_format="pyarrow", batch_size=FILES_PER_TASK)
        .materialize()
    )
    del items
    say(len(paths), len(paths), "ray: parse")
    files: dict[str, str] = {}
    keys: set[str] = set()
    for b in parsed.select_columns(["rel", "ok", "source_hash", "summary_keys"]).iter_batches(
        batch_format="pyarrow"
    ):
        for rel, ok, sh, sk in zip(*(b.column(i).to_pylist() for i in range(4)), strict=True):
            if ok:
                files[rel] = sh
                keys.update(sk)
    return parsed, files, keys


def _rows_and_vectors_on_ray(
    ray: Any,
    parsed: Any,
    cfg: EngineConfig,
    summaries: Mapping[str, str],
    embed_actors: int | None,
) -> Any:
    cpus = int(ray.cluster_resources().get("CPU", 1))
    actors = embed_actors if embed_actors is not None else max(1, cpus // 2)
    return (
        parsed.map_batches(
            row_stage,
            fn_kwargs={"cfg": cfg, "summaries": summaries},
            batch_format="pyarrow",
            batch_size=DOCS_PER_TASK,
            # Worker processes serve any number of tasks (0: no limit, Ray's default for CPU
            # tasks, said explicitly), so jieba's dictionary loads once per process. Said
            # explicitly, it also sets these tasks' remote args apart from the embedder
            # actors', and Ray Data fuses a task stage into the next actor stage only when
            # they agree: fused, chapters would be tokenized by as few processes as there
            # are embedders, instead of on the CPUs the actors leave free.
            max_calls=0,
        )
        .map_batches(
            EmbedStage,
            fn_constructor_args=(cfg.embedding,),
            batch_format="pyarrow",
            batch_size=ROWS_PER_EMBED,
            compute=ray.data.ActorPoolStrategy(size=actors),
        )
        .materialize()
    )


def _write_table(rows: Any, store: Any, uri: str, dims: int) -> None:
    import lance_ray

    from engine.store import chapter_schema  # deferred: loads lancedb (~2 s)

    schema = chapter_schema(dims)
    lance_ray.write_lance(
        rows.select_columns(schema.names),
        uri,
        schema=schema,
        mode="create",
        storage_options=dict(store.storage_options) or None,
    )


def _driver_batches(rows: Any, hashes: dict[str, tuple[str, str]]) -> Iterator[RowBatch]:
    """The rows' driver batches, filling ``hashes`` (id -> content and row hash) as they go."""
    from engine.table_write import ROW_BATCH  # deferred: loads lancedb (~2 s)

    wanted = ["id", "content_hash", "row_hash"] + [n for n, _ in EXTRA_FIELDS]
    for b in rows.select_columns(wanted).iter_batches(batch_format="pyarrow", batch_size=ROW_BATCH):
        hashes.update(
            zip(
                b.column("id").to_pylist(),
                zip(
                    b.column("content_hash").to_pylist(),
                    b.column("row_hash").to_pylist(),
                    strict=True,
                ),
                strict=True,
            )
        )
        yield _driver_batch(b)
