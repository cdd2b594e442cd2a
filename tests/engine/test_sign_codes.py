"""Sign-bit codes pick the vectors a big index scores exactly (engine/sign_codes.py)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine import sign_codes
from engine.config import EngineConfig
from engine.config_legacy import fill_legacy
from engine.embedding import make_embedder
from engine.indexer import build_index
from engine.search import Engine
from engine.sign_codes import SignCodes
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG

TOPICS = ["检索", "重排", "切块", "向量", "评测", "索引", "缓存", "权限", "部署", "监控"]


def _unit(rows: int, dims: int, seed: int) -> np.ndarray:
    m = np.random.default_rng(seed).standard_normal((rows, dims)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def test_codes_of_two_matrices_are_the_codes_of_their_stack() -> None:
    a, b = _unit(50, 100, 1), _unit(30, 100, 2)
    split, whole = SignCodes.of(a, b), SignCodes.of(np.vstack([a, b]))
    np.testing.assert_array_equal(split.codes, whole.codes)
    np.testing.assert_allclose(split.center, whole.center, atol=1e-6)
    assert split.codes.shape == (2, 80)  # 100 bits padded to two 64-bit words, word-major


def test_nearest_codes_find_the_vector_itself_and_its_neighbours() -> None:
    m = _unit(2000, 128, 3)
    codes = SignCodes.of(m)
    for row in (0, 17, 1999):
        assert row in codes.nearest(m[row], 5)
    # Random unit vectors (no clusters, the hard case): the 200 nearest codes of 2,000 hold
    # most of a query's exact top 10; 200 rows picked at random would hold 1 in 10.
    q = _unit(40, 128, 4)
    found = [
        len(set(np.argsort(-(m @ v))[:10]) & set(codes.nearest(v, 200).tolist())) / 10 for v in q
    ]
    assert np.mean(found) >= 0.6
    assert len(codes.nearest(q[0], 5000)) == 2000
    picked = codes.nearest(q[0], 300)
    assert len(picked) >= 300 and np.all(np.diff(picked) > 0)


def test_nearest_codes_keep_every_tie_of_the_last_one() -> None:
    m = np.repeat(_unit(3, 64, 5), 10, axis=0)  # three vectors, ten copies each
    assert sorted(SignCodes.of(m).nearest(m[0], 1).tolist()) == list(range(10))
    assert len(SignCodes.of(m).nearest(m[0], 11)) in (20, 30)


def _big_kb(root: Path) -> Path:
    for i in range(40):
        topic = TOPICS[i % len(TOPICS)]
        sections = "\n\n".join(
            f"## {topic}第{j}节\n\n"
            + "。".join(
                f"{topic}的第{i}个例子讲{TOPICS[(i + j + k) % 10]}和参数{k}" for k in range(8)
            )
            + "。"
            for j in range(3)
        )
        (root / f"doc{i:02d}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / f"doc{i:02d}.md").write_text(f"# {topic}手册{i}\n\n{sections}\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("big")
    kb_dir, idx = _big_kb(root / "kb"), root / "idx"
    build_index(parse_kb(kb_dir), HASH_CFG, str(idx))
    return kb_dir, idx


def _vector(kb_dir: Path, idx: Path, rows: int, q: str, pool: int = 10) -> list[tuple[str, float]]:
    cfg = HASH_CFG.with_overrides({"search.exact_vector_rows": rows})
    return list(Engine.open(kb_dir, idx, cfg).candidates(q, pool=pool, mode="vector").vector)


def test_codes_that_pick_every_vector_give_the_exact_scan(
    big: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb_dir, idx = big
    snap = Engine.open(kb_dir, idx, HASH_CFG)._shared.current().snapshot
    assert len(snap.passages) > 0  # the coded path covers passages too
    monkeypatch.setattr(sign_codes, "RESCORE_CANDIDATES", 10**6)
    for q in ("重排的参数", "向量索引的例子", "部署 监控"):
        assert _vector(kb_dir, idx, 1, q) == _vector(kb_dir, idx, 0, q)


def test_a_small_budget_returns_mostly_the_same_chapters_scored_by_their_picked_vectors(
    big: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb_dir, idx = big
    monkeypatch.setattr(sign_codes, "RESCORE_CANDIDATES", 120)
    overlap = []
    for q in ("重排的参数", "向量索引的例子", "部署 监控", "缓存权限", "切块第2节"):
        exact = dict(_vector(kb_dir, idx, 0, q, pool=200))
        coded = _vector(kb_dir, idx, 1, q)
        # A score is the exact cosine of the chapter's best vector among those picked: at
        # most its best over all its vectors, and the same where that one was picked.
        assert all(score <= exact[node] + 1e-6 for node, score in coded)
        assert coded[0][1] == pytest.approx(exact[coded[0][0]], abs=1e-6)
        top = [n for n, _ in sorted(exact.items(), key=lambda p: (-p[1], p[0]))[:10]]
        overlap.append(len(set(top) & {n for n, _ in coded}) / 10)
    assert np.mean(overlap) >= 0.6


def test_a_search_pool_is_the_head_of_the_deeper_pool_evaluation_caches(
    big: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Evaluation retrieves a deep pool once and cuts it; search asks for its own pool: the
    # vectors scored must not depend on the depth asked for.
    kb_dir, idx = big
    monkeypatch.setattr(sign_codes, "RESCORE_CANDIDATES", 120)
    for q in ("重排的参数", "部署 监控", "缓存权限"):
        deep = _vector(kb_dir, idx, 1, q, pool=200)
        assert _vector(kb_dir, idx, 1, q, pool=10) == deep[:10]
        assert len(deep) < 200  # 120 vectors cover fewer chapters: the pool comes back shorter


def test_a_filtered_search_scans_every_vector(
    big: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb_dir, idx = big
    snap = Engine.open(kb_dir, idx, HASH_CFG)._shared.current().snapshot
    q = make_embedder(HASH_CFG.embedding).embed_query("重排的参数")
    coded: list[int] = []
    real = snap._coded_top
    monkeypatch.setattr(snap, "_coded_top", lambda v, n: coded.append(n) or real(v, n))
    mask = np.ones(snap.rows, dtype=bool)
    assert snap.vector_top(q, 10, mask, exact_rows=1) == snap.vector_top(q, 10, None)
    assert coded == []
    snap.vector_top(q, 10, None, exact_rows=1)
    assert coded == [10]
    snap.vector_top(q, 10, None, exact_rows=snap.rows + len(snap.passages))  # under the limit
    assert coded == [10]


def test_a_config_saved_before_the_key_keeps_the_exact_scan() -> None:
    saved = EngineConfig().with_overrides({"index.passage_chars": 0}).to_dict()
    del saved["search"]["exact_vector_rows"]
    assert EngineConfig.from_dict(fill_legacy(saved)).search.exact_vector_rows == 0
    assert EngineConfig().search.exact_vector_rows == 20_000


def _owners_of(chapters: np.ndarray, passages: np.ndarray, per: int) -> np.ndarray:
    return np.concatenate(
        [np.arange(len(chapters)), np.repeat(np.arange(len(passages) // per), per)]
    )


def test_codes_of_clustered_vectors_agree_with_the_exact_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Embedding-like: chapters around 40 topics, each with three passages near it.
    rng = np.random.default_rng(6)
    topics = _unit(40, 128, 7)
    chapters = topics[rng.integers(0, 40, 600)] + 0.35 * _unit(600, 128, 8)
    chapters /= np.linalg.norm(chapters, axis=1, keepdims=True)
    passages = np.repeat(chapters, 3, axis=0) + 0.3 * _unit(1800, 128, 9)
    passages /= np.linalg.norm(passages, axis=1, keepdims=True)
    monkeypatch.setattr(sign_codes, "RESCORE_CANDIDATES", 600)
    codes = SignCodes.of(chapters, passages)
    assert (
        sign_codes.agreement(codes, (chapters, passages), _owners_of(chapters, passages, 3)) >= 0.99
    )


def test_codes_of_vectors_whose_dimensions_say_little_one_by_one_fail_their_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Each vector is a few strong dimensions of either sign and faint noise elsewhere (as
    # signed hashing gives): a bit is the noise's sign in most dimensions, so Hamming
    # distance says little about the angle.
    rng = np.random.default_rng(10)
    m = np.zeros((3000, 256), np.float32)
    for row in m:
        row[rng.choice(256, 4, replace=False)] = rng.choice([-1.0, 1.0], 4) * rng.uniform(0.5, 1, 4)
    m += 1e-3 * rng.standard_normal(m.shape).astype(np.float32)
    m /= np.linalg.norm(m, axis=1, keepdims=True)
    monkeypatch.setattr(sign_codes, "RESCORE_CANDIDATES", 300)
    owners = np.arange(len(m))
    assert sign_codes.agreement(SignCodes.of(m), (m,), owners) < sign_codes.FAITHFUL_AGREEMENT
    # Codes that pick every vector are exact by construction.
    monkeypatch.setattr(sign_codes, "RESCORE_CANDIDATES", 5000)
    assert sign_codes.agreement(SignCodes.of(m), (m,), owners) == 1.0


def test_codes_that_fail_their_check_leave_the_search_to_the_exact_scan(
    big: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    kb_dir, idx = big
    monkeypatch.setattr(sign_codes, "RESCORE_CANDIDATES", 120)
    monkeypatch.setattr(sign_codes, "FAITHFUL_AGREEMENT", 1.01)  # no codes can pass
    cfg = HASH_CFG.with_overrides({"search.exact_vector_rows": 1})
    snap = Engine.open(kb_dir, idx, cfg)._shared.current().snapshot
    q = make_embedder(HASH_CFG.embedding).embed_query("重排的参数")
    assert snap.vector_top(q, 200, None, exact_rows=1) == snap.vector_top(q, 200, None)
    assert snap.codes_agreement is not None and snap.codes_agreement <= 1.0
    for text in ("重排的参数", "部署 监控"):
        assert _vector(kb_dir, idx, 1, text, pool=200) == _vector(kb_dir, idx, 0, text, pool=200)


def test_warm_up_builds_and_checks_the_codes_only_where_searches_use_them(
    big: tuple[Path, Path],
) -> None:
    kb_dir, idx = big
    for rows, built in ((1, True), (0, False), (10**6, False)):
        eng = Engine.open(kb_dir, idx, HASH_CFG.with_overrides({"search.exact_vector_rows": rows}))
        eng.warm_up()
        assert (eng.codes_agreement is not None) is built
