"""The Ray build (engine/ray_build.py) writes the same index as a single-process build."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.config import EngineConfig
from engine.embedding import HashEmbedder
from engine.errors import EngineError
from engine.index_caches import current_title_terms, split_lexical_payload
from engine.indexer import build_index
from engine.lexical import SparseBM25
from engine.manifest import read_manifest
from engine.search import Engine
from engine.store import Location, Store, vectors_of
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, TINY_KB, write_kb
from tests.engine.test_store import moto_s3  # noqa: F401  # the S3 server fixture

HAS_RAY = all(importlib.util.find_spec(m) is not None for m in ("ray", "lance_ray"))
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="ray / lance-ray not installed (ray extra)")

# The tiny KB plus English chapters (stemmed terms), a file without headings and a binary
# file the parser rejects, so every path of the row builder is compared.
KB_FILES = {
    **TINY_KB,
    "ops/deploy.md": "# Deploying the service\n\nDeployments roll out gradually.\n\n"
    "## Rolling updates\n\nUpdating replicas one by one keeps serving.\n\n"
    "## Rollbacks\n\nRolling back restores the previous release.\n",
    "ops/notes.md": "Plain notes without any heading, about caching and 缓存失效.\n",
    "ops/broken.md": "\x00\x01 binary",
}


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    """A local Ray the builds join (two CPUs, no dashboard: CI has two cores)."""
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def built(ray_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same KB indexed in this process and on Ray (small batches: many Ray tasks)."""
    from engine import ray_build

    tmp = tmp_path_factory.mktemp("raybuild")
    kb = write_kb(tmp / "kb", KB_FILES)
    cfg = HASH_CFG.with_overrides({"embedding.batch_size": 3})
    single = build_index(
        parse_kb(kb), cfg, str(tmp / "single"), embedder=HashEmbedder(cfg.embedding)
    )
    mp = pytest.MonkeyPatch()
    mp.setattr(ray_build, "FILES_PER_TASK", 2)
    mp.setattr(ray_build, "DOCS_PER_TASK", 2)
    mp.setattr(ray_build, "ROWS_PER_EMBED", 5)
    stages: list[str] = []
    try:
        on_ray = ray_build.build_index_ray(
            kb, cfg, str(tmp / "ray"), progress=lambda d, t, s: stages.append(s)
        )
    finally:
        mp.undo()
    return {
        "kb": kb,
        "cfg": cfg,
        "single": (tmp / "single", single),
        "ray": (tmp / "ray", on_ray),
        "stages": stages,
    }


def _rows(idx: Path) -> tuple[Any, np.ndarray]:
    m = read_manifest(Location(str(idx)))
    assert m is not None
    data = Store.read(Store(str(idx)).open_table(m.table, m.version))
    return data.drop_columns(["vector"]).to_pylist(), vectors_of(data)


def _counts(idx: Path) -> tuple[dict[tuple[str, str], float], dict[tuple[str, str], float]]:
    """BM25 body and title counts as {(id, term): count}: equal whatever the term order."""
    loc = Location(str(idx))
    m = read_manifest(loc)
    assert m is not None
    payload = loc.read_bytes(m.lexical_file) or b""
    ids, start = split_lexical_payload(payload)
    bm25 = SparseBM25.from_bytes(payload, k1=1.5, b=0.75, start=start)

    def cells(mat: Any) -> dict[tuple[str, str], float]:
        c = mat.tocoo()
        return {
            (ids[r], bm25.terms[t]): float(v) for r, t, v in zip(c.row, c.col, c.data, strict=True)
        }

    return cells(bm25.counts), cells(bm25.title_counts)


@needs_ray
def test_ray_build_writes_the_same_rows_as_a_single_process_build(built: dict[str, Any]) -> None:
    (single_idx, single), (ray_idx, on_ray) = built["single"], built["ray"]
    rows_a, vec_a = _rows(single_idx)
    rows_b, vec_b = _rows(ray_idx)
    assert len(rows_a) == 17  # 3 x 4 tiny-KB nodes, 4 deploy, 1 notes, none of broken.md
    assert on_ray.rows == single.rows == len(rows_b)
    # Same ids in the same order, same texts, tokens, hashes and metadata.
    assert rows_b == rows_a
    np.testing.assert_allclose(vec_b, vec_a, rtol=0, atol=1e-6)
    assert on_ray.full_rebuild and on_ray.added == on_ray.embedded == len(rows_a)


@needs_ray
def test_ray_build_writes_the_same_manifest_bm25_and_vocabulary(built: dict[str, Any]) -> None:
    (single_idx, _), (ray_idx, _) = built["single"], built["ray"]
    a = read_manifest(Location(str(single_idx)))
    b = read_manifest(Location(str(ray_idx)))
    assert a is not None and b is not None
    for key in ("nodes", "files", "kb_fingerprint", "signature", "tokenizer", "hash_context"):
        assert getattr(b, key) == getattr(a, key), key
    assert "ops/broken.md" not in b.files and "ops/notes.md" in b.files
    la, lb = Location(str(single_idx)), Location(str(ray_idx))
    titles = current_title_terms(la, a)
    assert titles and current_title_terms(lb, b) == titles
    assert _counts(ray_idx) == _counts(single_idx)
    terms_a = json.loads(la.read_text(a.vocab_terms_file) or "{}")["terms"]
    terms_b = json.loads(lb.read_text(b.vocab_terms_file) or "{}")["terms"]
    assert terms_b == terms_a


@needs_ray
def test_an_engine_on_the_ray_index_answers_like_one_on_the_single_process_index(
    built: dict[str, Any],
) -> None:
    kb, cfg = built["kb"], built["cfg"]
    e1 = Engine.open(kb, str(built["single"][0]), cfg)
    e2 = Engine.open(kb, str(built["ray"][0]), cfg)
    for q in ("切块", "rolling back a release", "召回率 MRR"):
        r1, r2 = e1.search(q), e2.search(q)
        assert [r.node_id for r in r2.results] == [r.node_id for r in r1.results]
        assert [r.score for r in r2.results] == pytest.approx([r.score for r in r1.results])


@needs_ray
def test_ray_build_over_an_existing_index_replaces_it_and_drops_the_old_table(
    built: dict[str, Any], tmp_path: Path
) -> None:
    from engine.ray_build import build_index_ray

    kb, cfg = built["kb"], built["cfg"]
    idx = tmp_path / "idx"
    first = build_index(parse_kb(kb), cfg, str(idx), embedder=HashEmbedder(cfg.embedding))
    (kb / "ops" / "notes.md").unlink()
    report = build_index_ray(kb, cfg, str(idx))
    assert report.full_rebuild and report.removed == 1 and report.added == 0
    assert report.updated == first.rows - 1
    assert Store(str(idx)).table_names() == [report.table]
    m = read_manifest(Location(str(idx)))
    assert m is not None and m.table == report.table and "ops/notes.md" not in m.files


@needs_ray
def test_ray_build_writes_an_index_on_s3_that_an_engine_searches(
    ray_cluster: Any,
    moto_s3: str,  # noqa: F811  # the fixture imported above
    tmp_path: Path,
) -> None:
    from engine.ray_build import build_index_ray

    opts = {
        "endpoint": moto_s3,
        "allow_http": "true",
        "aws_access_key_id": "test",
        "aws_secret_access_key": "test",
        "region": "us-east-1",
    }
    uri = "s3://wikirag-test/indexes/ray"
    kb = write_kb(tmp_path / "kb")
    report = build_index_ray(kb, HASH_CFG, uri, storage_options=opts)
    assert report.rows == 12
    m = read_manifest(Location(uri, opts))
    assert m is not None and m.table == report.table
    engine = Engine.open(kb, uri, HASH_CFG, opts)
    assert engine.search("重排 延迟").results[0].node_id == "retrieval/rerank#重排/延迟"


@needs_ray
def test_a_failing_stage_is_one_clear_error_and_leaves_no_index(
    ray_cluster: Any, tmp_path: Path
) -> None:
    from engine.ray_build import build_index_ray

    (tmp_path / "not-a-model").mkdir()
    cfg = HASH_CFG.with_overrides(
        {
            "embedding.provider": "sentence-transformers",
            "embedding.model": str(tmp_path / "not-a-model"),
        }
    )
    idx = tmp_path / "idx"
    with pytest.raises(EngineError, match="could not load a sentence-transformers model") as err:
        build_index_ray(
            write_kb(tmp_path / "kb"), cfg, str(idx), embedder=HashEmbedder(cfg.embedding)
        )
    assert "\n" not in str(err.value)
    assert read_manifest(Location(str(idx))) is None


@needs_ray
def test_cli_index_with_ray_builds_on_ray_and_prints_the_report(
    ray_cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workbench.cli import main

    kb, idx = write_kb(tmp_path / "kb"), tmp_path / "idx"
    args = ["index", "--kb", str(kb), "--index", str(idx), "--set", "embedding.provider=hash"]
    assert main([*args, "--ray", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["full_rebuild"] and report["rows"] == 12
    # index.ray_address in the config asks for Ray too: a second full build, a new table.
    assert main([*args, "--set", "index.ray_address=local", "--json"]) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["full_rebuild"] and again["updated"] == 12 and again["table"] != report["table"]


def test_asking_for_ray_without_it_installed_says_to_install_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from engine.ray_build import build_index_ray

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(EngineError, match="install the ray extra"):
        build_index_ray(write_kb(tmp_path / "kb"), HASH_CFG, str(tmp_path / "idx"))


def test_cli_index_without_ray_never_imports_ray(tmp_path: Path) -> None:
    kb = write_kb(tmp_path / "kb")
    code = (
        "import sys; import engine.ray_build; from workbench.cli import main; "
        f"rc = main(['index', '--kb', {str(kb)!r}, '--index', {str(tmp_path / 'idx')!r}, "
        "'--set', 'embedding.provider=hash', '--json']); "
        "assert rc == 0; print('RAY', 'ray' in sys.modules, 'lance_ray' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=Path.cwd()
    ).stdout
    assert "RAY False False" in out


def test_ray_address_is_a_config_key_that_leaves_the_config_hash_alone() -> None:
    cfg = EngineConfig().with_overrides({"index.ray_address": "ray://head:10001"})
    assert cfg.index.ray_address == "ray://head:10001"
    assert cfg.hash == EngineConfig().hash
    assert EngineConfig().with_overrides({"index.content_chars": 900}).hash != cfg.hash
