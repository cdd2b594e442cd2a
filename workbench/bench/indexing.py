"""The bench's build stages: the KB, parse, the warm model, embedding alone, full and
incremental index. Each returns the result fields it measured."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.embedding import make_embedder
from engine.expansion import embed_vocabulary
from engine.indexer import build_index
from engine.manifest import read_manifest
from engine.parse_cache import ParseCache
from engine.rows import embed_text, node_passages
from engine.store import Location
from engine.tree import parse_kb
from engine.types import Embedder
from workbench.bench.measure import ProgressFactory
from workbench.bench.synthetic import copy_kb, synthetic_kb


def write_kb(
    kb_dir: Path,
    *,
    kb: str | Path | None,
    synthetic: int | None,
    limit_docs: int | None,
    seed: int,
    say: Callable[[str], None],
    notes: list[str],
) -> dict[str, Any]:
    """The KB the bench runs on, written to ``kb_dir``: synthetic, or a copy of ``kb``."""
    out: dict[str, Any] = {}
    t = time.perf_counter()
    if synthetic is not None:
        say(f"bench: writing {synthetic} synthetic chapters to {kb_dir}")
        synthetic_kb(kb_dir, synthetic, seed=seed)
        out["kb"] = f"synthetic:{synthetic}"
        out["synthetic_write_s"] = round(time.perf_counter() - t, 3)
    elif kb is not None:
        n_files = copy_kb(kb, kb_dir, limit_docs)
        out["kb"] = str(kb)
        if limit_docs is not None:
            out["limit_docs"] = limit_docs
            notes.append(f"only the first {n_files} Markdown files (path order) of {kb}")
    return out


def parse_timed(
    kb_dir: Path, bar: ProgressFactory
) -> tuple[KnowledgeBase, ParseCache, dict[str, Any]]:
    """The parsed KB, the parse cache the incremental stage reuses, and the parse fields."""
    t = time.perf_counter()
    pbar = bar("parse", 0)
    # The cache a long-running engine (or `wikirag index`, on disk) keeps between parses.
    parse_cache = ParseCache()
    kbase = parse_kb(kb_dir, cache=parse_cache)
    pbar.close()
    fields = {
        "parse_s": round(time.perf_counter() - t, 3),
        "chapters": len(kbase.nodes),
        "documents": len(kbase.documents),
    }
    return kbase, parse_cache, fields


def load_warm_embedder(cfg: EngineConfig) -> tuple[Embedder, dict[str, Any]]:
    """The embedder, loaded and warmed up (kept out of every other figure)."""
    t = time.perf_counter()
    embedder = make_embedder(cfg.embedding)
    embedder.embed_documents(["warm up", "预热"])
    embedder.embed_query("warm up")
    sig = embedder.signature
    return embedder, {
        "model_load_s": round(time.perf_counter() - t, 3),
        "embedder": f"{sig.provider}/{sig.model}/{sig.dims}",
    }


def time_chapter_embedding(kbase: KnowledgeBase, cfg: EngineConfig, embedder: Embedder) -> float:
    """Seconds the embedder alone takes over the chapter texts the indexer embeds."""
    texts = [embed_text(n, cfg.index.content_chars) for n in kbase.nodes.values()]
    return _time_embedding(texts, cfg, embedder)


def time_passage_embedding(kbase: KnowledgeBase, cfg: EngineConfig, embedder: Embedder) -> float:
    """Seconds the embedder alone takes over the passage texts the indexer embeds (0 when
    ``index.passage_chars`` is 0): without them a build's passage embedding would count
    as non-embedding work."""
    texts = [t for n in kbase.nodes.values() for t in node_passages(n, cfg)]
    return _time_embedding(texts, cfg, embedder)


def _time_embedding(texts: list[str], cfg: EngineConfig, embedder: Embedder) -> float:
    """Seconds ``embedder`` takes over ``texts`` in the indexer's batch size."""
    batch = max(1, cfg.embedding.batch_size)
    t = time.perf_counter()
    for start in range(0, len(texts), batch):
        embedder.embed_documents(texts[start : start + batch])
    return round(time.perf_counter() - t, 3)


def build_full(
    kbase: KnowledgeBase,
    cfg: EngineConfig,
    idx: Path,
    embedder: Embedder,
    bar: ProgressFactory,
) -> dict[str, Any]:
    """A full index build from scratch, timed."""
    pbar = bar("index", len(kbase.nodes))

    def progress(done: int, total: int, stage: str) -> None:
        pbar.set_description_str(f"index:{stage}")
        pbar.n = done
        pbar.total = total
        if hasattr(pbar, "refresh"):
            pbar.refresh()

    t = time.perf_counter()
    report = build_index(kbase, cfg, str(idx), progress, embedder=embedder)
    seconds = round(time.perf_counter() - t, 3)
    pbar.close()
    return {"index_full_s": seconds, "index_full_report": report.to_dict()}


def time_vocabulary_embedding(idx: Path, embedder: Embedder) -> dict[str, Any]:
    """The embedder alone over the expansion vocabulary the built index holds."""
    loc = Location(str(idx))
    manifest = read_manifest(loc)
    assert manifest is not None
    vocab_terms = json.loads(loc.read_text(manifest.vocab_terms_file) or "{}").get("terms", [])
    t = time.perf_counter()
    embed_vocabulary(vocab_terms, embedder)
    return {"vocab_terms": len(vocab_terms), "embed_vocab_s": round(time.perf_counter() - t, 3)}


def reparse_after_edit(
    kb_dir: Path, kbase: KnowledgeBase, parse_cache: ParseCache
) -> tuple[KnowledgeBase, str, dict[str, Any]]:
    """The KB parsed again after one file was edited: the new KB, the file, the fields."""
    edited = _edit_one_file(kb_dir, kbase)
    parse_cache.reset_counts()
    t = time.perf_counter()
    kb2 = parse_kb(kb_dir, cache=parse_cache)
    fields = {
        "parse_incremental_s": round(time.perf_counter() - t, 3),
        "parse_incremental_files": {"parsed": parse_cache.parsed, "reused": parse_cache.reused},
    }
    return kb2, edited, fields


def build_incremental(
    kb2: KnowledgeBase, cfg: EngineConfig, idx: Path, embedder: Embedder, edited: str
) -> dict[str, Any]:
    """The incremental update after the edit, timed (``parse_s`` is added by the caller)."""
    t = time.perf_counter()
    report = build_index(kb2, cfg, str(idx), embedder=embedder)
    return {
        "index_incremental_s": round(time.perf_counter() - t, 3),
        "index_incremental_report": {**report.to_dict(), "edited_file": edited},
    }


def _edit_one_file(kb_dir: Path, kb: KnowledgeBase) -> str:
    """Append a sentence to one chapter in the middle of the KB; returns the file path."""
    docs = [d for d in kb.documents if len(d.nodes) > 1]
    doc = docs[len(docs) // 2] if docs else kb.documents[len(kb.documents) // 2]
    path = kb_dir / doc.file_path
    text = path.read_text(encoding="utf-8")
    path.write_text(text.rstrip("\n") + "\n\n本段为基准测试的增量修改。Edited by the benchmark.\n")
    return doc.file_path
