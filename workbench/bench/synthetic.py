"""The KB a bench runs on: a deterministic synthetic one, or a copy of a real one."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import numpy as np

from engine.tree import markdown_files

_ZH_CHARS = (
    "数据库索引查询事务存储引擎分布式集群节点副本调度优化执行计划统计信息缓存日志恢复备份"
    "迁移同步复制监控告警配置参数性能延迟吞吐资源内存磁盘网络安全权限用户角色审计加密"
    "表结构字段类型约束主键外键分区压缩编码格式文件目录版本升级兼容测试部署运维工具命令"
    "模型向量检索召回排序融合切块文档章节标题摘要关键词评估指标实验基线对比报告"
)
_EN_SYLLABLES = [
    "ka",
    "lo",
    "mi",
    "ra",
    "te",
    "su",
    "no",
    "vi",
    "be",
    "da",
    "ze",
    "fo",
    "gu",
    "li",
    "ma",
    "re",
    "sa",
    "to",
    "ne",
    "ki",
    "po",
    "ru",
    "ha",
    "ye",
    "wa",
    "tri",
    "sto",
    "pla",
    "gre",
    "bro",
    "cla",
    "dri",
    "fle",
    "spo",
    "qua",
]
_CATEGORIES = ("storage", "sql", "ops", "security", "search", "eval", "sync", "tools")


class _Words:
    """A fixed pseudo-vocabulary with Zipf-like frequencies (deterministic for a seed)."""

    def __init__(self, seed: int, n_zh: int = 3000, n_en: int = 3000) -> None:
        rng = random.Random(seed)
        chars = list(dict.fromkeys(_ZH_CHARS))
        zh: set[str] = set()
        while len(zh) < n_zh:
            zh.add("".join(rng.choice(chars) for _ in range(rng.choice((2, 2, 3)))))
        en: set[str] = set()
        while len(en) < n_en:
            en.add("".join(rng.choice(_EN_SYLLABLES) for _ in range(rng.choice((2, 3, 3, 4)))))
        self.zh = sorted(zh)
        self.en = sorted(en)
        rng.shuffle(self.zh)
        rng.shuffle(self.en)
        self.zh_cum = list(np.cumsum([1.0 / (r + 1) ** 0.9 for r in range(len(self.zh))]))
        self.en_cum = list(np.cumsum([1.0 / (r + 1) ** 0.9 for r in range(len(self.en))]))

    def zh_words(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.zh, cum_weights=self.zh_cum, k=k)

    def en_words(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.en, cum_weights=self.en_cum, k=k)

    def sentence(self, rng: random.Random, zh: bool) -> str:
        k = rng.randint(6, 12)
        if zh:
            return "".join(self.zh_words(rng, k)) + "。"
        words = self.en_words(rng, k)
        return " ".join(words).capitalize() + "."

    def title(self, rng: random.Random, zh: bool) -> str:
        if zh:
            return "".join(self.zh_words(rng, 3)) + " " + self.en_words(rng, 1)[0]
        return " ".join(w.capitalize() for w in self.en_words(rng, 3))


def synthetic_kb(
    folder: str | Path,
    n_chapters: int,
    *,
    seed: int = 20250101,
    per_doc: int = 10,
    zh_share: float = 0.7,
) -> dict[str, int]:
    """Write a KB of about ``n_chapters`` chapter nodes as Markdown files; returns counts.

    Each file: front matter, an H1 with an intro paragraph and ``per_doc - 2`` H2 chapters
    (the parser adds the document node, so one file = ``per_doc`` nodes). Chapters are
    2-4 sentences of a fixed pseudo-vocabulary (70% pseudo-Chinese, 30% pseudo-English).
    """
    if n_chapters < 1:
        raise ValueError("--synthetic needs at least 1 chapter")
    folder = Path(folder)
    words = _Words(seed)
    rng = random.Random(seed + 1)
    per_doc = max(3, per_doc)
    n_docs = max(1, -(-n_chapters // per_doc))
    for d in range(n_docs):
        zh = rng.random() < zh_share
        sub = folder / f"part{d // 1000:03d}"
        sub.mkdir(parents=True, exist_ok=True)
        title = words.title(rng, zh)
        kws = ", ".join(words.zh_words(rng, 2) if zh else words.en_words(rng, 2))
        lines = [
            "---",
            f"title: {title}",
            "type: concept",
            f"category: {_CATEGORIES[d % len(_CATEGORIES)]}",
            f"priority: P{d % 3}",
            f"keywords: {kws}",
            "---",
            "",
            f"# {title}",
            "",
            " ".join(words.sentence(rng, zh) for _ in range(rng.randint(1, 3))),
            "",
        ]
        seen: set[str] = set()
        for _ in range(per_doc - 2):
            h = words.title(rng, zh)
            while h in seen:
                h = words.title(rng, zh)
            seen.add(h)
            body = (" " if not zh else "").join(
                words.sentence(rng, zh) for _ in range(rng.randint(2, 4))
            )
            lines += [f"## {h}", "", body, ""]
        (sub / f"doc{d:06d}.md").write_text("\n".join(lines), encoding="utf-8")
    return {"documents": n_docs, "chapters": n_docs * per_doc}


def copy_kb(src: str | Path, dst: str | Path, limit_docs: int | None = None) -> int:
    """Copy a KB's Markdown files (the first ``limit_docs`` in path order); returns the count."""

    src, dst = Path(src), Path(dst)
    files = markdown_files(src)
    if limit_docs is not None:
        files = files[: max(0, limit_docs)]
    for f in files:
        out = dst / f.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(f, out)
    dst.mkdir(parents=True, exist_ok=True)
    return len(files)
