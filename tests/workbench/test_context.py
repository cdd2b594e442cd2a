from pathlib import Path

import pytest

from engine.errors import EngineError
from workbench.workspace import resolve


def test_defaults_and_dataset_name(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    ws = resolve("kb")
    assert ws.index == Path(".wikirag/kb")
    assert ws.dataset == Path("datasets/kb.yaml")
    assert ws.config_path is None
    assert resolve("kb", dataset="other").dataset == Path("datasets/other.yaml")
    assert resolve("kb", dataset="x/y.yaml").dataset == Path("x/y.yaml")


def test_baseline_config_is_default(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    (tmp_path / "experiments" / "kb" / "baseline.yaml").write_text("fusion:\n  k: 30\n")
    ws = resolve("kb")
    assert ws.load_config().fusion.k == 30


def test_missing_kb_is_clear(tmp_path):
    with pytest.raises(EngineError, match="pass --kb DIR"):
        resolve(tmp_path / "nope")
