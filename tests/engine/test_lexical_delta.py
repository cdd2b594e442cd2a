from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import orjson
import pytest

from engine.chapters import KnowledgeBase
from engine.lexical_delta import (
    CountsDelta,
    current_df,
    current_titles,
    delta_payload,
    empty_delta,
    extended,
    merged,
    needs_compaction,
    read_delta_payload,
    read_stats_payload,
    stats_of,
    stats_payload,
)
from engine.rows import build_rows, title_terms
from engine.term_counts import LexicalCounts, lexical_of
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb


def _full(kb: KnowledgeBase) -> LexicalCounts:
    return lexical_of([build_rows(list(kb.nodes.values()), HASH_CFG)])


def _cells(ids: list[str], counts, terms: list[str]) -> dict[tuple[str, str], float]:
    c = counts.tocoo()
    return {(ids[r], terms[t]): float(v) for r, t, v in zip(c.row, c.col, c.data, strict=True)}


def _assert_same(a: LexicalCounts, b: LexicalCounts) -> None:
    assert a.ids == b.ids
    assert _cells(a.ids, a.counts, a.terms) == _cells(b.ids, b.counts, b.terms)
    assert sorted(a.terms) == sorted(b.terms)  # no term left that no row holds
    assert _cells(a.ids, a.crumb_counts, a.crumb_terms) == _cells(
        b.ids, b.crumb_counts, b.crumb_terms
    )
    assert a.title_terms == b.title_terms


def _update(
    delta: CountsDelta, now: LexicalCounts, old_kb: KnowledgeBase, new_kb: KnowledgeBase
) -> CountsDelta:
    """The delta after changing ``old_kb`` into ``new_kb`` (every node of a changed file
    rewritten), the stale rows' terms read from the current full counts ``now``."""
    changed = [n for n in new_kb.nodes if n in old_kb.nodes and new_kb.nodes[n] != old_kb.nodes[n]]
    added = [n for n in new_kb.nodes if n not in old_kb.nodes]
    stale = changed + [n for n in old_kb.nodes if n not in new_kb.nodes]
    in_delta = set(delta.ids)
    row = {nid: i for i, nid in enumerate(now.ids)}
    base_df: Counter[str] = Counter()
    for nid in stale:
        if nid not in in_delta:
            r = now.counts[row[nid]]
            base_df.update(now.terms[j] for j in r.indices)
    titles: Counter[str] = Counter()
    for nid in stale:
        titles.update(title_terms(old_kb.nodes[nid]))
    rows = build_rows([new_kb.nodes[n] for n in changed + added], HASH_CFG)
    return extended(delta, stale, base_df, titles, rows)


def _edit(kb_dir: Path, step: int) -> None:
    if step == 1:
        p = kb_dir / "retrieval/rerank.md"
        text = p.read_text().replace("候选数不宜超过 35。", "候选数不宜超过 20。")
        p.write_text(text.replace("## 交叉编码器", "## 双塔与交叉编码器"), "utf-8")
        q = kb_dir / "rag/chunking.md"
        q.write_text(q.read_text().replace("keywords: [切块, chunking]", "keywords: [分块]"))
        (kb_dir / "faq.md").write_text("# 常见问题\n\n索引多久更新一次？每晚。\n", "utf-8")
        (kb_dir / "evaluation/metrics.md").unlink()
    else:  # rows of the delta change again, one goes; a base row changes
        p = kb_dir / "retrieval/rerank.md"
        p.write_text(p.read_text() + "\n补充：延迟预算。\n", "utf-8")
        (kb_dir / "faq.md").unlink()
        q = kb_dir / "rag/chunking.md"
        q.write_text(q.read_text() + "\n## 语义切块\n\n按语义边界切块。\n", "utf-8")


def test_base_plus_delta_equals_counting_the_current_rows(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    kb0 = parse_kb(kb_dir)
    base = _full(kb0)
    stats = stats_of(base)
    delta, now, old_kb = empty_delta(), base, kb0
    for step in (1, 2):
        _edit(kb_dir, step)
        kb = parse_kb(kb_dir)
        delta = _update(delta, now, old_kb, kb)
        full = _full(kb)
        now = merged(base, stats, delta)
        _assert_same(now, full)
        # The vocabulary's inputs without the base matrix: df and title terms.
        terms, df = current_df(stats, delta)
        want = dict(zip(full.terms, np.bincount(full.counts.indices).tolist(), strict=True))
        got = {t: int(n) for t, n in zip(terms, df, strict=True) if n}
        assert got == want and (df >= 0).all()
        assert current_titles(stats, delta) == full.title_terms
        old_kb = kb
    # Removed base rows are exactly the base ids that are not current base rows.
    current_base = set(base.ids) - set(delta.removed)
    assert current_base | set(delta.ids) == set(now.ids)
    assert current_base.isdisjoint(delta.ids)
    assert "evaluation/metrics" in delta.removed and "faq" not in delta.ids  # added, then gone
    assert set(delta.removed) <= set(base.ids)


def test_payloads_round_trip(tmp_path: Path) -> None:
    kb_dir = write_kb(tmp_path / "kb")
    kb0 = parse_kb(kb_dir)
    base = _full(kb0)
    _edit(kb_dir, 1)
    delta = _update(empty_delta(), base, kb0, parse_kb(kb_dir))
    back = read_delta_payload(delta_payload(delta))
    assert (back.removed, back.ids, back.terms, back.crumb_terms) == (
        delta.removed,
        delta.ids,
        delta.terms,
        delta.crumb_terms,
    )
    assert (back.gone_df, back.titles) == (delta.gone_df, delta.titles)
    assert (back.counts != delta.counts).nnz == 0
    assert (back.crumb_counts != delta.crumb_counts).nnz == 0
    stats = stats_of(base)
    s2 = read_stats_payload(stats_payload(stats))
    assert s2.terms == stats.terms and s2.title_terms == stats.title_terms
    np.testing.assert_array_equal(s2.df, stats.df)
    empty = read_delta_payload(delta_payload(empty_delta()))
    assert empty.size == 0 and merged(base, stats, empty).ids == base.ids


def test_a_stale_row_already_removed_is_an_error(tmp_path: Path) -> None:
    kb0 = parse_kb(write_kb(tmp_path / "kb"))
    base = _full(kb0)
    rows = build_rows([], HASH_CFG)
    delta = extended(empty_delta(), ["rag/chunking"], {}, {}, rows)
    with pytest.raises(ValueError, match="neither in the base nor in the delta"):
        extended(delta, ["rag/chunking"], {}, {}, rows)
    assert merged(base, stats_of(base), delta).ids == [i for i in base.ids if i != "rag/chunking"]


def test_compaction_threshold_is_a_share_of_the_rows() -> None:
    import engine.lexical_delta as ld

    small = CountsDelta(["a"] * 10, [], empty_delta().counts, [], empty_delta().counts, [], {}, {})
    assert not needs_compaction(small, 100)  # under the minimum
    big = CountsDelta(
        ["a"] * (ld.COMPACT_MIN_ROWS + 1), [], small.counts, [], small.counts, [], {}, {}
    )
    assert needs_compaction(big, 1000) and not needs_compaction(big, 1_000_000)


def test_stats_keep_their_terms_sorted_and_unsorted_files_still_read(tmp_path: Path) -> None:
    import io

    kb0 = parse_kb(write_kb(tmp_path / "kb"))
    base = _full(kb0)
    stats = stats_of(base)
    assert stats.terms == sorted(base.terms)
    want = dict(zip(base.terms, np.bincount(base.counts.indices).tolist(), strict=True))
    assert dict(zip(stats.terms, stats.df.tolist(), strict=True)) == want
    # A stats file in the base's own term order (no "sorted" flag) reads sorted.
    buf = io.BytesIO()
    z = np.load(io.BytesIO(stats_payload(stats)))
    rev = list(reversed(range(len(stats.terms))))
    np.savez(
        buf,
        terms=np.frombuffer(orjson.dumps([stats.terms[i] for i in rev]), np.uint8),
        df=stats.df[rev],
        title_terms=z["title_terms"],
    )
    back = read_stats_payload(buf.getvalue())
    assert back.terms == stats.terms and back.df.tolist() == stats.df.tolist()
