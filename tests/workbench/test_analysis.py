"""Failure analysis and run-vs-run views over saved run records."""

from __future__ import annotations

import pytest

from workbench.eval import analysis as A
from workbench.eval.run_record import RunRecord


def _q(qid, ranked, relevant, *, rec5, mrr, cause=None, attribution=(), **meta):
    return {
        "id": qid,
        "query": f"query {qid}",
        "mode": "hybrid",
        "relevant": list(relevant),
        "difficulty": meta.get("difficulty", "easy"),
        "category": meta.get("category", "rag"),
        "language": meta.get("language", "zh"),
        "split": "tune",
        "metrics": {"recall@5": rec5, "mrr": mrr},
        "latency_ms": 1.0,
        "cause": cause,
        "attribution": list(attribution),
        "error": None,
        "ranked": [
            {
                "node_id": n,
                "score": 1.0 / i,
                "vector_rank": i,
                "bm25_rank": None,
                "fusion_rank": i,
                "rerank_rank": None,
                "rerank_score": None,
                "injected_from": None,
            }
            for i, n in enumerate(ranked, 1)
        ],
    }


def _miss(nid, cause):
    return {
        "node_id": nid,
        "cause": cause,
        "final_rank": 7,
        "fusion_rank": 7,
        "vector_rank": 7,
        "bm25_rank": None,
        "vector_rank_any": 7,
        "bm25_rank_any": 250,
    }


def _record(run_id, config_hash, queries):
    """A saved run record (JSON) around ``queries``; the summary is not what is tested."""
    empty = {"by_difficulty": {}, "by_category": {}, "by_language": {}, "failures": {}}
    data = {
        "schema_version": 2,
        "run_id": run_id,
        "created": "2026-12-01T00:00:00Z",
        "engine_version": "0.1.0",
        "kb": "kb",
        "index_fingerprint": "",
        "config_hash": config_hash,
        "config_yaml": "",
        "dataset": {"name": "d", "path": "", "hash": "h"},
        "split": "all",
        "modes": ["hybrid"],
        "rerank": False,
        "seconds": 0.0,
        "cache": {"hits": 0, "misses": 0},
        "errors": 0,
        "summary": {"hybrid": {"means": {}, "latency": {}, **empty, "queries": len(queries)}},
        "queries": queries,
    }
    return RunRecord.from_dict(data, f"run {run_id}")


RUN_A = _record(
    "A",
    "aaaaaa111111",
    [
        _q("q1", ["x", "g1"], ["g1"], rec5=1.0, mrr=0.5),
        _q(
            "q2",
            ["x", "y"],
            ["g2"],
            rec5=0.0,
            mrr=0.0,
            cause="lost_in_bm25",
            attribution=[_miss("g2", "lost_in_bm25")],
            category="agents",
        ),
        _q(
            "q3",
            ["g3a", "y"],
            ["g3a", "g3b"],
            rec5=0.5,
            mrr=1.0,
            cause="dropped_by_fusion",
            attribution=[_miss("g3b", "dropped_by_fusion")],
        ),
        _q("q4", ["g4", "z"], ["g4"], rec5=1.0, mrr=1.0),
    ],
)
RUN_B = _record(
    "B",
    "bbbbbb222222",
    [
        _q("q1", ["g1", "x"], ["g1"], rec5=1.0, mrr=1.0),  # won
        _q("q2", ["x", "y"], ["g2"], rec5=0.0, mrr=0.0),  # tied, same list
        _q("q3", ["y", "g3a"], ["g3a", "g3b"], rec5=0.5, mrr=0.5),  # lost
        _q("q4", ["g4", "w"], ["g4"], rec5=1.0, mrr=1.0),  # changed: same mrr, new list
    ],
)


def test_failures_are_worst_first_and_filter_by_cause_and_slice():
    rows = A.failures(RUN_A, "hybrid")
    assert [r.id for r in rows] == ["q2", "q3"]  # recall 0.0 before 0.5; passing q1/q4 absent
    assert [r.id for r in A.failures(RUN_A, "hybrid", cause="dropped_by_fusion")] == ["q3"]
    assert [
        r.id for r in A.failures(RUN_A, "hybrid", slice_by="category", slice_value="agents")
    ] == ["q2"]
    assert rows[0].to_dict()["cause_text"] == "lost in BM25 candidates"


def test_failures_reject_an_unknown_slice():
    with pytest.raises(ValueError, match="slice must be one of"):
        A.failures(RUN_A, "hybrid", slice_by="colour", slice_value="red")


def test_story_gives_integer_ranks_and_the_stage_that_lost_each_gold_chapter():
    s = A.story(RUN_A, "hybrid", "q3")
    assert [r.fusion for r in s.ranked] == [1, 2]
    assert all(isinstance(r.fusion, int) for r in s.ranked)
    found, lost = s.gold
    assert (found.node_id, found.final, found.cause, found.lost_at) == ("g3a", 1, None, None)
    assert (lost.node_id, lost.cause, lost.lost_at, lost.bm25_any) == (
        "g3b",
        "dropped_by_fusion",
        "fusion",
        250,
    )
    with pytest.raises(KeyError, match="q9"):
        A.story(RUN_A, "hybrid", "q9")


def test_run_matrix_labels_won_lost_tied_and_changed_queries():
    rows = A.run_matrix([RUN_A, RUN_B], "hybrid", "mrr")
    by_id = {r.id: r for r in rows}
    assert by_id["q1"].outcome == "won" and by_id["q1"].deltas == (0.5,)
    assert by_id["q3"].outcome == "lost" and by_id["q3"].deltas == (-0.5,)
    assert by_id["q2"].outcome == "tied"
    assert by_id["q4"].outcome == "changed"
    assert A.outcome_counts(rows) == {"won": 1, "lost": 1, "tied": 1, "changed": 1}
    assert [r.id for r in A.run_matrix([RUN_A, RUN_B], "hybrid", outcome="lost")] == ["q3"]
    assert by_id["q1"].first_relevant == (2, 1)
    # the largest moves come first
    assert {rows[0].id, rows[1].id} == {"q1", "q3"}


def test_run_matrix_needs_two_runs_and_a_known_outcome():
    with pytest.raises(ValueError, match="at least two"):
        A.run_matrix([RUN_A], "hybrid")
    with pytest.raises(ValueError, match="outcome must be"):
        A.run_matrix([RUN_A, RUN_B], "hybrid", outcome="better")


def test_side_by_side_marks_gold_in_each_runs_list():
    gold, lists = A.side_by_side([RUN_A, RUN_B], "hybrid", "q1")
    assert gold == ["g1"]
    assert lists == [[("x", False), ("g1", True)], [("g1", True), ("x", False)]]


def test_cli_failures_and_runs_diff_read_saved_runs(tmp_path, capsys, monkeypatch):
    import json

    from workbench.cli import main

    runs = tmp_path / "experiments" / "kb" / "runs"
    runs.mkdir(parents=True)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# A\n", encoding="utf-8")
    for rec in (RUN_A, RUN_B):
        (runs / f"{rec.run_id}.json").write_text(json.dumps(rec.to_dict()), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert main(["failures", "--kb", "kb", "--run", "A", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [f["id"] for f in out["failures"]] == ["q2", "q3"]
    assert main(["runs", "diff", "A", "B", "--kb", "kb", "--outcome", "lost"]) == 0
    text = capsys.readouterr().out
    assert "1 won, 1 lost, 1 tied, 1 changed" in text and "q3" in text
    assert main(["failures", "--kb", "kb", "--run", "A", "--query", "q3"]) == 0
    assert (
        "g3b: rank 7; vector 7, bm25 250 (past the pool), fusion 7 — dropped by fusion"
        in capsys.readouterr().out
    )
    assert main(["runs", "diff", "A", "--kb", "kb"]) == 2
    assert "2 to 4 runs" in capsys.readouterr().err
