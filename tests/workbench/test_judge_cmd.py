"""`wikirag judge`: the queue from saved runs, one-off judgments, and rater agreement."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from sklearn.metrics import cohen_kappa_score

from engine.config import EngineConfig
from engine.pipeline import Ranked
from tests.engine.engine_kit import write_kb
from workbench.cli import main
from workbench.eval import golden
from workbench.eval import judgments as J
from workbench.eval.agreement import agreement, cohen_kappa, fleiss_kappa
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord, save_run

GOLD = """name: kb
queries:
  - id: q1
    query: 按标题切块
    relevant: ["rag/chunking#切块策略/按标题切块"]
  - id: q2
    query: 重排延迟
    relevant: ["retrieval/rerank#重排/延迟"]
"""
TOPS = {
    "q1": [
        "rag/chunking#切块策略/按标题切块",
        "rag/chunking#切块策略/固定长度切块",
        "rag/chunking",
    ],
    "q2": ["retrieval/rerank#重排/交叉编码器", "retrieval/rerank#重排/延迟"],
}


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(J.RATER_ENV, raising=False)
    write_kb(tmp_path / "kb")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(GOLD, encoding="utf-8")
    gs = golden.load(tmp_path / "datasets" / "kb.yaml")
    results = [
        QueryRecord(
            gs.get(q),  # type: ignore[arg-type]
            "hybrid",
            [Ranked(n, 1.0, None, None, i + 1, None) for i, n in enumerate(ids)],
            {"mrr": 0.0},
            1.0,
            [],
            None,
        )
        for q, ids in TOPS.items()
    ]
    run = RunRecord.of(EngineConfig(), results, run_id="20261202-000000-aaaaaa", created="", dataset=DatasetRef("kb", str(gs.path), gs.content_hash), split="all", modes=("hybrid",), rerank=False, kb="kb")  # fmt: skip
    save_run(run, tmp_path / "experiments" / "kb" / "runs")
    return tmp_path


def _queue(capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert main(["judge", "--kb", "kb", "--list", "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_queue_lists_the_latest_runs_unjudged_top_chapters(ws: Path, capsys) -> None:
    q = _queue(capsys)
    assert [(e["query_id"], e["node_id"]) for e in q] == [
        ("q1", "rag/chunking#切块策略/固定长度切块"),
        ("q1", "rag/chunking"),
        ("q2", "retrieval/rerank#重排/交叉编码器"),
    ]


def test_judge_set_records_and_shrinks_the_queue(ws: Path, capsys) -> None:
    args = ["judge", "set", "q2", "retrieval/rerank#重排/交叉编码器", "1", "--kb", "kb"]
    assert main([*args, "--rater", "ana"]) == 0
    rows = J.read(ws / "datasets" / "kb.judgments.jsonl")
    assert [(j.query_id, j.grade, j.rater) for j in rows] == [("q2", 1, "ana")]
    capsys.readouterr()
    assert len(_queue(capsys)) == 2


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["q1", "rag/chunking", "5", "--rater", "a"], "grade must be 0"),
        (["q9", "rag/chunking", "2", "--rater", "a"], "no query 'q9'"),
        (["q1", "nope", "2", "--rater", "a"], "no chapter 'nope'"),
        (["q1", "rag/chunking", "2"], "pass --rater NAME"),
    ],
)
def test_judge_set_refuses_bad_input_in_one_line(ws: Path, capsys, argv, message) -> None:
    assert main(["judge", "set", *argv, "--kb", "kb"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (ws / "datasets" / "kb.judgments.jsonl").exists()


def test_the_prompt_saves_each_key_and_quits_keeping_them(ws, capsys, monkeypatch) -> None:
    monkeypatch.setenv(J.RATER_ENV, "bo")
    monkeypatch.setattr("sys.stdin", io.StringIO("3\nx\n?\nq\n"))
    assert main(["judge", "--kb", "kb"]) == 0
    out = capsys.readouterr().out
    assert "切块策略 > 固定长度切块" in out and "grade must be" in out  # breadcrumb; x refused
    rows = J.read(ws / "datasets" / "kb.judgments.jsonl")
    assert [(j.node_id, j.grade, j.rater) for j in rows] == [
        ("rag/chunking#切块策略/固定长度切块", 3, "bo"),
        ("rag/chunking", J.UNSURE, "bo"),
    ]
    # bo said "can't tell" for one: it leaves bo's queue, not everyone's.
    assert len(_queue(capsys)) == 2


A = [0, 1, 2, 3, 3, 2, 0, 1, 2, 2, 3, 0]
B = [3, 2, 2, 3, 2, 2, 1, 1, 3, 2, 3, 0]


def _two_raters() -> list[J.Judgment]:
    return [J.Judgment(f"q{n % 3}", f"n{n}", g, "ana") for n, g in enumerate(A)] + [
        J.Judgment(f"q{n % 3}", f"n{n}", g, "bo") for n, g in enumerate(B)
    ]


@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_two_raters_kappa_is_scikit_learns(weights: str | None) -> None:
    want = cohen_kappa_score(A, B, labels=[0, 1, 2, 3], weights=weights)
    res = agreement(_two_raters(), weights=weights)
    assert res.kappa == pytest.approx(want)
    assert res.pairs == 12 and res.raters == ("ana", "bo")
    q0 = [n for n in range(12) if n % 3 == 0]
    assert res.per_query["q0"] == pytest.approx(
        cohen_kappa_score(
            [A[n] for n in q0], [B[n] for n in q0], labels=[0, 1, 2, 3], weights=weights
        )
    )


def test_disagreements_are_listed_largest_first() -> None:
    res = agreement(_two_raters())
    assert [(d.node_id, d.grades) for d in res.disagreements][:1] == [("n0", {"ana": 0, "bo": 3})]
    assert len(res.disagreements) == sum(a != b for a, b in zip(A, B, strict=True))


def test_fleiss_kappa_matches_the_textbook_example() -> None:
    # Fleiss (1971)'s worked layout as taught (Wikipedia, "Fleiss' kappa"): 10 subjects,
    # 14 raters, 5 categories; P = 0.378, Pe = 0.213, kappa = 0.210.
    table = [
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ]  # fmt: skip
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=1e-4)


def test_three_raters_get_fleiss_kappa_from_their_grades() -> None:
    grades = {"a": [0, 2, 3, 3], "b": [0, 2, 2, 3], "c": [1, 2, 3, 3]}
    js = [J.Judgment("q", f"n{i}", g, r) for r, gs in grades.items() for i, g in enumerate(gs)]
    table = [[sum(gs[i] == c for gs in grades.values()) for c in range(4)] for i in range(4)]
    res = agreement(js)
    assert res.method == "fleiss" and res.kappa == pytest.approx(fleiss_kappa(table))
    # P_i: 1/3, 1, 1/3, 1 -> P = 2/3; shares 2/12, 1/12, 4/12, 5/12 -> Pe = 46/144.
    assert res.kappa == pytest.approx((2 / 3 - 46 / 144) / (1 - 46 / 144))


def test_later_and_unsure_are_not_ratings() -> None:
    js = [J.Judgment("q", "n", 2, "a"), J.Judgment("q", "n", J.LATER, "b")]
    assert agreement(js).pairs == 0 and agreement(js).kappa is None


def test_kappa_is_undefined_when_both_raters_use_one_grade() -> None:
    assert cohen_kappa([2, 2], [2, 2]) is None


def test_agreement_cli_prints_kappa_and_disagreements(ws: Path, capsys) -> None:
    J.append(ws / "datasets" / "kb.judgments.jsonl", _two_raters())
    assert main(["judge", "agreement", "--kb", "kb", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["kappa"] == pytest.approx(
        cohen_kappa_score(A, B, labels=[0, 1, 2, 3], weights="linear")
    )
    assert main(["judge", "agreement", "--kb", "kb"]) == 0
    assert "disagreements" in capsys.readouterr().out
