"""Rows into the LanceDB table: a full build appends batches, an update writes the changes.

A full build streams ``build_rows`` batches (in worker processes once the KB is big enough),
embeds each and appends it, so memory holds a few batches, not the KB's rows. An update
builds and embeds only the new and changed nodes, then writes them and deletes the removed.
"""

from __future__ import annotations

import itertools
import os
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future

import numpy as np

from engine.chapters import KnowledgeBase, Node
from engine.config import EngineConfig
from engine.hash_tables import NodeHashes
from engine.index_plan import UpdatePlan
from engine.rows import RowBatch, build_rows, summary_key
from engine.store import PASSAGES, ChapterTable, Store, passages_of, sql_str, vectors_of
from engine.term_counts import CountsBuilder, LexicalCounts
from engine.tokenizer import warm_up
from engine.types import Embedder, ProgressFn

# Below this many nodes a full build tokenizes in this process: starting worker processes
# (each imports the engine and loads jieba's dictionary) costs more than it saves.
POOL_MIN_NODES = 16_384
ROW_BATCH = 2048  # nodes per worker task and per table append: bounds the build's memory


def worker_count(n_nodes: int, workers: int | None) -> int:
    """Processes a full build of ``n_nodes`` uses (``workers`` None: decide by size)."""
    if workers is not None:
        return max(1, workers)
    return (os.cpu_count() or 1) if n_nodes >= POOL_MIN_NODES else 1


def row_batches(
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
    step = ROW_BATCH  # read once: a test shrinks it to get several batches
    starts = range(0, len(nodes), step)

    def args(start: int) -> tuple[list[Node], EngineConfig, dict[str, str]]:
        chunk = list(nodes[start : start + step])
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
            pending: deque[Future[RowBatch]] = deque()
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


def write_full(
    tbl: ChapterTable,
    kb: KnowledgeBase,
    cfg: EngineConfig,
    embedder: Embedder,
    summaries: Mapping[str, str],
    progress: ProgressFn | None,
    workers: int | None,
) -> tuple[NodeHashes, LexicalCounts]:
    """Append every node's row to the empty ``tbl``; returns the hash pairs and counts."""
    nodes = list(kb.nodes.values())
    batch = max(1, cfg.embedding.batch_size)
    # Hash pairs as columns over the KB's own id strings: at 1M chapters a dict of tuples
    # with ids copied out of every batch held ~0.3 GB more through the rest of the build.
    keys: list[str] = []
    embed_hashes: list[str] = []
    row_hashes: list[str] = []
    counts = CountsBuilder()
    for rows in row_batches(nodes, cfg, summaries, worker_count(len(nodes), workers)):
        vecs = embed_all(embedder, rows.embed_texts, batch)
        Store.add_columns(tbl, rows.columns, vecs, embed_passages(embedder, rows, batch))
        ids = [n.node_id for n in nodes[len(keys) : len(keys) + rows.columns.num_rows]]
        keys += ids
        embed_hashes += rows.columns.column("content_hash").to_pylist()
        row_hashes += rows.columns.column("row_hash").to_pylist()
        counts.add(rows, ids)
        if progress:
            progress(len(keys), len(nodes), "embed")
    if progress:
        progress(0, 1, "lexical")
    return NodeHashes(keys, (embed_hashes, row_hashes)), counts.result()


def embed_all(embedder: Embedder, texts: Sequence[str], batch: int) -> np.ndarray:
    """``texts`` embedded in batches of ``batch``: a float32 (len(texts), dims) matrix."""
    parts = [
        np.asarray(embedder.embed_documents(list(texts[s : s + batch])), dtype=np.float32)
        for s in range(0, len(texts), batch)
    ]
    return np.concatenate(parts) if parts else np.zeros((0, embedder.signature.dims), np.float32)


def embed_passages(
    embedder: Embedder, rows: RowBatch, batch: int, keep: Sequence[int] | None = None
) -> list[np.ndarray] | None:
    """Each row's passage vectors (rows ``keep`` only, when given); None when no row has
    passages (passages off), so the column is written empty."""
    picked = range(len(rows.passage_texts)) if keep is None else keep
    lists = [rows.passage_texts[i] for i in picked]
    if not any(lists):
        return None
    flat = embed_all(embedder, [t for texts in lists for t in texts], batch)
    ends = np.cumsum([len(texts) for texts in lists])
    return [flat[end - len(texts) : end] for end, texts in zip(ends, lists, strict=True)]


def write_incremental(
    tbl: ChapterTable,
    kb: KnowledgeBase,
    cfg: EngineConfig,
    embedder: Embedder,
    plan: UpdatePlan,
    summaries: Mapping[str, str],
    prev: Mapping[str, Sequence[str]],
    progress: ProgressFn | None,
) -> tuple[RowBatch, int]:
    """Upsert new and changed rows, delete removed ones; returns the rows written and how
    many were embedded."""
    hashes, added, changed = plan.hashes, plan.added, plan.changed
    todo = added + changed
    pairs = [(hashes[n][0], hashes[n][1]) for n in todo]
    rows = build_rows([kb.nodes[n] for n in todo], cfg, summaries, pairs)
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
    position = {n: i for i, n in enumerate(todo)}
    fresh = embed_passages(embedder, rows, batch, [position[n] for n in to_embed])
    passages: dict[str, np.ndarray] = dict(zip(to_embed, fresh, strict=True)) if fresh else {}
    has_passages = PASSAGES in tbl.schema.names
    for start in range(0, len(reuse), 500):
        part = reuse[start : start + 500]
        where = f"id IN ({', '.join(sql_str(i) for i in part)})"
        got = Store.read(tbl, ["id", "vector", *([PASSAGES] if has_passages else [])], where)
        got_ids = got.column("id").to_pylist()
        vectors.update(zip(got_ids, vectors_of(got), strict=True))
        if has_passages:
            passages.update(zip(got_ids, passages_of(got), strict=True))
    dims = embedder.signature.dims
    mat = (
        np.stack([np.asarray(vectors[n], np.float32) for n in todo])
        if todo
        else np.zeros((0, dims))
    )
    # merge_insert, not delete + add: at 100k rows the two measured alike (0.05-1.8 s each
    # under load 17, docs/benchmarks.md), and this writes one table version, not two.
    empty = np.zeros((0, dims), np.float32)
    row_passages = [passages.get(n, empty) for n in todo]
    for start in range(0, len(todo), ROW_BATCH):
        Store.upsert_columns(
            tbl,
            rows.columns.slice(start, ROW_BATCH),
            mat[start : start + ROW_BATCH],
            row_passages[start : start + ROW_BATCH],
        )
        if progress:
            progress(min(start + ROW_BATCH, len(todo)), len(todo), "write")
    Store.delete_ids(tbl, plan.removed)
    return rows, len(to_embed)
