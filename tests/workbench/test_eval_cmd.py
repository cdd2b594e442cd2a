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
from workbench.eval.trec import read_qrels, read_run


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
    # the default (statistical) rule: all 5 queries lose, exact one-sided p = 1/32 < 0.05
    assert "gate: FAIL: regression vs baseline" in err and "mrr not significantly worse" in err


def test_gate_uses_the_kb_rule_file(ws: Path, capsys) -> None:
    (ws / "experiments" / "kb" / "rule.yaml").write_text("preset: strict\n", encoding="utf-8")
    args = ["eval", "--kb", "kb", "--gate", "--no-save", "--set", "fusion.vector_weight=0"]
    args += ["--set", "fusion.bm25_weight=0"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "recall@5 delta" in err and "rule strict" in err


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


def test_eval_answers_on_a_set_of_only_unanswerable_items_prints_refusals(ws: Path, capsys):
    (ws / "none.yaml").write_text(
        "name: none\nqueries:\n  - {id: u1, query: 公司食堂几点关门, unanswerable: true}\n",
        encoding="utf-8",
    )
    assert main(["eval", "--kb", "kb", "--dataset", "none.yaml", "--answers", "--no-save"]) == 0
    out = capsys.readouterr().out
    assert "no answerable queries in this split" in out
    assert re.search(r"^refusals: unanswerable refused [01]/1 ", out, re.MULTILINE), out


def _add_items(ws: Path, extra: str) -> None:
    path = ws / "datasets" / "kb.yaml"
    path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + "\n" + extra, encoding="utf-8")


STALE = '  - {id: q20, query: 不存在的章节, relevant: ["no/such#chapter"], difficulty: easy}\n'
DUPLICATE = '  - {id: q1, query: 另一个问题, relevant: ["rag/chunking#切块策略/按标题切块"]}\n'
EMPTY = '  - {id: q21, query: "", relevant: ["rag/chunking#切块策略/按标题切块"]}\n'


@pytest.mark.parametrize(
    ("extra", "why"),
    [(STALE, "unknown node id"), (DUPLICATE, "id used 2 times"), (EMPTY, "query is empty")],
)
def test_eval_refuses_an_invalid_golden_set(ws: Path, capsys, extra: str, why: str) -> None:
    _add_items(ws, extra)
    assert main(["eval", "--kb", "kb"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("wikirag: error: golden set tiny is invalid: ") and why in err
    assert "--allow-invalid" in err and err.count("\n") == 1
    assert not (ws / "experiments" / "kb" / "runs").exists()  # nothing scored, nothing saved


def test_eval_allow_invalid_skips_and_names_the_bad_items(ws: Path, capsys) -> None:
    _add_items(ws, STALE + DUPLICATE)
    assert main(["eval", "--kb", "kb", "--allow-invalid", "--json"]) == 0
    out, err = capsys.readouterr()
    assert "--allow-invalid: skipped 3 of 8 golden items with errors (q1, q20)" in err
    ids = [q["id"] for q in json.loads(out)["queries"]]
    assert sorted(ids) == ["q2", "q3", "q4", "q5"]  # both q1s dropped: neither is "the" q1


def test_experiment_try_refuses_an_invalid_golden_set(ws: Path, capsys) -> None:
    _add_items(ws, DUPLICATE)
    assert main(["experiment", "try", "--kb", "kb", "--set", "fusion.k=30"]) == 2
    assert "golden set tiny is invalid: [error] q1: id used 2 times" in capsys.readouterr().err
    assert not (ws / "experiments" / "kb" / "experiments.jsonl").exists()


def test_experiment_try_allow_invalid_says_what_it_skipped(ws: Path, capsys) -> None:
    _add_items(ws, STALE)
    rc = main(["experiment", "try", "--kb", "kb", "--set", "fusion.k=30", "--allow-invalid"])
    assert rc == 0
    assert "skipped 1 of 7 golden items with errors (q20)" in capsys.readouterr().err


def test_duplicate_ids_never_collapse_in_per_query_scores() -> None:
    from engine.errors import EngineError
    from tests.workbench.test_experiments import _run

    run = _run([(0.5, 0.5, 1.0), (1.0, 1.0, 1.0)])
    object.__setattr__(run.queries[1], "item", run.queries[0].item)
    with pytest.raises(EngineError, match="appears twice"):
        run.means("hybrid")


def test_gate_refuses_an_invalid_golden_set_unless_allowed(ws: Path) -> None:
    from workbench.eval import golden
    from workbench.eval.engines import evaluator
    from workbench.tune.gate import gate
    from workbench.workspace import resolve

    w = resolve("kb")
    cfg = HASH_CFG.with_overrides({"fusion.k": 30})  # not the baseline: the gate compares
    current = evaluator(w, cfg).run(golden.load(w.dataset), cfg, modes=["hybrid"])
    _add_items(ws, STALE)
    with pytest.raises(golden.GoldenSetError, match="golden set tiny is invalid"):
        gate(w, current)
    notes: list[str] = []
    ok, reason = gate(w, current, allow_invalid=True, notify=notes.append)
    assert ok, reason
    assert notes == [n for n in notes if "skipped 1 of 7 golden items with errors (q20)" in n]
    assert len(notes) == 1
