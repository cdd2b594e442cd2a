import json
from pathlib import Path

import pytest

from tests.engine.engine_kit import write_kb
from workbench.cli import main

GOLD = """# labels for the tiny KB
name: kb
queries:
  - id: q1
    query: 按标题切块
    relevant: ["rag/chunking#切块策略/按标题切块"]
    difficulty: easy
    category: rag
  - id: q2
    query: 重排延迟
    relevant: ["retrieval/rerank#重排/延时"]   # heading was renamed to 延迟
    difficulty: medium
    category: retrieval
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_kb(tmp_path / "kb")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(GOLD, encoding="utf-8")
    return tmp_path


def test_validate_reports_stale_id_and_exits_1(ws: Path, capsys) -> None:
    assert main(["golden", "validate", "--kb", "kb"]) == 1
    out = capsys.readouterr().out
    assert "q2: unknown node id 'retrieval/rerank#重排/延时'" in out
    assert "did you mean: retrieval/rerank#重排/延迟" in out


def test_drift_then_remap_with_suggestions_keeps_comments(ws: Path, capsys) -> None:
    assert main(["golden", "drift", "--kb", "kb", "--json"]) == 0
    drift = json.loads(capsys.readouterr().out)
    assert drift[0]["item"] == "q2" and drift[0]["suggestions"][0] == "retrieval/rerank#重排/延迟"
    assert main(["golden", "remap", "--kb", "kb", "--apply-suggestions"]) == 0
    text = (ws / "datasets" / "kb.yaml").read_text(encoding="utf-8")
    assert "retrieval/rerank#重排/延迟" in text and "# labels for the tiny KB" in text
    assert main(["golden", "validate", "--kb", "kb"]) == 0


def test_remap_rejects_unknown_target(ws: Path, capsys) -> None:
    assert main(["golden", "remap", "--kb", "kb", "retrieval/rerank#重排/延时=nope"]) == 2
    assert "is not a node id" in capsys.readouterr().err
