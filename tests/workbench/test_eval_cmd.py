"""`wikirag eval` end to end on a tiny KB: tables, run record, TREC export, --gate, --answers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.indexer import build_index
from engine.tree import parse_kb
from tests.engine.engine_kit import HASH_CFG, write_kb
from tests.workbench.test_evaluate import GOLDEN
from workbench.cli import main
from workbench.trec import read_qrels, read_run


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    kb = write_kb(tmp_path / "kb")
    build_index(parse_kb(kb), HASH_CFG, str(tmp_path / ".wikirag" / "kb"))
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(GOLDEN, encoding="utf-8")
    exp = tmp_path / "experiments" / "kb"
    exp.mkdir(parents=True)
    HASH_CFG.save(exp / "baseline.yaml")
    return tmp_path


def test_eval_prints_tables_and_writes_record_and_trec(ws: Path, capsys) -> None:
    rc = main(
        [
            "eval",
            "--kb",
            "kb",
            "--modes",
            "hybrid",
            "keyword",
            "--trec-run",
            "run.txt",
            "--trec-qrels",
            "qrels.txt",
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "== hybrid" in out and "== keyword" in out and "recall" in out
    records = list((ws / "experiments" / "kb" / "runs").glob("*.json"))
    assert len(records) == 1
    rec = json.loads(records[0].read_text(encoding="utf-8"))
    assert rec["config_hash"] == HASH_CFG.hash and rec["modes"] == ["hybrid", "keyword"]
    run = read_run(ws / "run.txt")
    qrels = read_qrels(ws / "qrels.txt")
    assert set(run) == set(qrels) == {"q1", "q2", "q3", "q4", "q5"}


def test_eval_json_stdout_is_only_json(ws: Path, capsys) -> None:
    assert main(["eval", "--kb", "kb", "--json", "--no-save"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["summary"]["hybrid"]["queries"] == 5


def test_gate_passes_on_baseline_and_fails_on_regression(ws: Path, capsys) -> None:
    assert main(["eval", "--kb", "kb", "--gate", "--no-save"]) == 0
    assert "gate: PASS" in capsys.readouterr().out
    # both fusion weights 0: hybrid fusion returns nothing, a clear regression
    rc = main(
        [
            "eval",
            "--kb",
            "kb",
            "--gate",
            "--no-save",
            "--set",
            "fusion.vector_weight=0",
            "--set",
            "fusion.bm25_weight=0",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 1
    assert "gate: FAIL: regression vs baseline" in err and "recall@5" in err


def test_eval_answers_scores_extractive_answers(ws: Path, capsys, monkeypatch) -> None:
    for var in ("OPENAI_BASE_URL", "WIKIRAG_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    assert main(["eval", "--kb", "kb", "--answers", "--json", "--no-save"]) == 0
    data = json.loads(capsys.readouterr().out)
    answers = data["answers"]
    assert answers["mode"] == "extractive"
    assert {r["id"] for r in answers["per_query"]} == {"q1", "q2", "q3", "q4", "q5", "q9"}
    assert 0.0 <= answers["means"]["refusal_accuracy"] <= 1.0
    assert "citation_precision" in answers["means"]


def test_eval_answers_prints_both_refusal_rates_with_counts(ws: Path, capsys, monkeypatch):
    for var in ("OPENAI_BASE_URL", "WIKIRAG_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    assert main(["eval", "--kb", "kb", "--answers", "--no-save"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("refusals: "))
    m = re.fullmatch(
        r"refusals: unanswerable refused (\d+)/(\d+) \(\S+\), "
        r"answerable wrongly refused (\d+)/(\d+) \(\S+\)",
        line,
    )
    assert m is not None, line
    assert int(m.group(2)) + int(m.group(4)) == 6  # q1-q5 answerable, q9 unanswerable
