"""Helpers shared by the engine tests: a tiny KB on disk and instrumented embedders/rerankers."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from engine.config import EngineConfig
from engine.embedding import HashEmbedder
from engine.errors import ProviderError
from engine.types import EmbedderSignature

HASH_CFG = EngineConfig().with_overrides({"embedding.provider": "hash"})

TINY_KB = {
    "rag/chunking.md": """---
title: 切块策略
type: pattern
priority: P0
category: rag
keywords: [切块, chunking]
---
# 切块策略

切块决定检索的最小单位。

## 按标题切块

按 Markdown 标题切块，每个章节是一个块。

## 固定长度切块

按固定 token 数切块，块之间有 overlap。
""",
    "retrieval/rerank.md": """---
title: 重排
type: concept
priority: P1
category: retrieval
keywords: [重排, rerank, 交叉编码器]
---
# 重排

重排模型对候选做精排。

## 交叉编码器

交叉编码器同时读取查询和文档。

## 延迟

重排会增加延迟，候选数不宜超过 35。
""",
    "evaluation/metrics.md": """---
title: 检索指标
type: concept
priority: P0
category: evaluation
keywords: [召回率, MRR]
---
# 检索指标

检索指标衡量检索系统的好坏。

## 召回率

召回率衡量相关章节有多少被检索到。

## MRR

MRR 是第一个相关结果排名的倒数的平均。
""",
}


def write_kb(root: Path, files: dict[str, str] | None = None) -> Path:
    """Write the tiny KB (or ``files``) under ``root`` and return it."""
    for rel, text in (files or TINY_KB).items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    return root


class CountingEmbedder:
    """Wraps the hash embedder; records every text embedded; can fail after N texts."""

    def __init__(self, dims: int = 0, fail_after: int | None = None) -> None:
        self.inner = HashEmbedder(HASH_CFG.embedding if not dims else _dims(dims))
        self.fail_after = fail_after
        self.texts: list[str] = []
        self.calls = 0
        self.queries = 0
        self._lock = threading.Lock()

    @property
    def signature(self) -> EmbedderSignature:
        return self.inner.signature

    @property
    def chapter_texts(self) -> list[str]:
        """Texts that were chapters (the embedded text layout starts with "path: ")."""
        return [t for t in self.texts if t.startswith("path: ")]

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        with self._lock:
            self.calls += 1
            if self.fail_after is not None and len(self.texts) + len(texts) > self.fail_after:
                raise ProviderError("embedder failed half-way (test)")
            self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            self.queries += 1
        return self.inner.embed_query(text)


def _dims(d: int):
    return HASH_CFG.with_overrides({"embedding.dims": d}).embedding


class FakeReranker:
    """Scores passages by a fixed table of substrings -> score (0.0 when none matches)."""

    def __init__(self, table: dict[str, float], fail: bool = False) -> None:
        self.table = table
        self.fail = fail
        self.calls: list[tuple[str, int]] = []

    @property
    def name(self) -> str:
        return "fake-reranker"

    def score(self, query: str, passages: list[str]) -> list[float]:
        self.calls.append((query, len(passages)))
        if self.fail:
            raise ProviderError("rerank endpoint timed out (test)")
        out = []
        for p in passages:
            out.append(max((s for key, s in self.table.items() if key in p), default=0.0))
        return out
