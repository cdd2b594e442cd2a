"""TREC qrels/run files: parsing, trec_eval's ordering, errors with line numbers, round trips."""

from __future__ import annotations

from dataclasses import replace

import pytest

from engine.errors import EngineError
from workbench.eval.trec import (
    TrecFormatError,
    format_ranked,
    format_ranking,
    read_qrels,
    read_run,
    read_run_scores,
    read_run_tag,
    write_qrels,
    write_ranking,
    write_run,
)


def test_read_qrels_with_comments_blank_lines_and_hash_in_docid(tmp_path):
    path = tmp_path / "qrels"
    path.write_text("# header\n\nq1 0 d#1 2\n  # indented comment\nq1 0 d2 0\nq2 0 d3 -1\n")
    assert read_qrels(path) == {"q1": {"d#1": 2, "d2": 0}, "q2": {"d3": -1}}


def test_read_run_reorders_by_score_then_docid_descending(tmp_path):
    path = tmp_path / "run"
    # the rank column disagrees with the scores; trec_eval ignores it and so do we
    path.write_text(
        "q1 Q0 a 1 1.0 tag\nq1 Q0 c 2 1.0 tag\nq1 Q0 b 3 2.5 tag\nq1\tQ0\td\t4\t  0.1\ttag extra words\n"
    )
    assert read_run(path) == {"q1": ["b", "c", "a", "d"]}
    assert read_run_scores(path) == {"q1": {"a": 1.0, "c": 1.0, "b": 2.5, "d": 0.1}}
    assert read_run_tag(path) == "tag"


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("q1 0 d1 1\nq1 0 d2\n", 2, "expected 4 columns"),
        ("q1 0 d1 1\n\nq1 0 d2 yes\n", 3, "not an integer"),
        ("q1 0 d1 1\nq1 0 d1 0\n", 2, "judged twice"),
    ],
)
def test_qrels_errors_name_the_line(tmp_path, text, line, what):
    path = tmp_path / "qrels"
    path.write_text(text)
    with pytest.raises(TrecFormatError, match=f":{line}: .*{what}"):
        read_qrels(path)


@pytest.mark.parametrize(
    ("text", "line", "what"),
    [
        ("q1 Q0 d1 1 0.5\n", 1, "expected 6 columns"),
        ("# c\nq1 Q0 d1 1 high run\n", 2, "not a number"),
        ("q1 Q0 d1 1 nan run\n", 1, "NaN"),
        ("q1 Q0 d1 1 1 run\nq1 Q0 d1 2 0.5 run\n", 2, "appears twice"),
    ],
)
def test_run_errors_name_the_line(tmp_path, text, line, what):
    path = tmp_path / "run"
    path.write_text(text)
    with pytest.raises(TrecFormatError, match=f":{line}: .*{what}"):
        read_run(path)


def test_missing_file_is_an_engine_error(tmp_path):
    with pytest.raises(EngineError, match="no such file"):
        read_qrels(tmp_path / "absent")
    with pytest.raises(EngineError, match="folder"):
        read_run(tmp_path)


def test_round_trips(tmp_path):
    qrels = {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 3}}
    write_qrels(tmp_path / "qrels", qrels)
    assert read_qrels(tmp_path / "qrels") == qrels

    scores = {"q1": {"a": 0.1, "b": 1 / 3, "c": 1 / 3}, "q2": {"x": -2.0}}
    write_run(tmp_path / "run", scores, tag="mine")
    assert read_run_scores(tmp_path / "run") == scores  # repr keeps every bit of a float
    assert read_run(tmp_path / "run") == {"q1": ["c", "b", "a"], "q2": ["x"]}
    assert read_run_tag(tmp_path / "run") == "mine"


def test_ranking_keeps_our_order_even_against_docid_order(tmp_path):
    run = {"q1": ["a", "b", "a", "c"]}
    write_ranking(tmp_path / "run", run)
    assert read_run(tmp_path / "run") == {"q1": ["a", "b", "c"]}
    assert format_ranking(run).splitlines()[0] == "q1 Q0 a 1 3.0 wikirag"


def test_whitespace_in_ids_is_refused(tmp_path):
    with pytest.raises(ValueError, match="whitespace"):
        write_ranking(tmp_path / "run", {"q 1": ["a"]})


def test_trec_eval_fixtures_parse(shared_data):
    folder = shared_data / "benchmarks" / "trec_eval-test"
    qrels = read_qrels(folder / "qrels.test")
    assert sum(len(v) for v in qrels.values()) == 3681
    assert read_qrels(folder / "qrels.test.with-comments")["301"]["CR#93E-1860"] == 0
    run = read_run(folder / "results.test")
    assert {q: len(v) for q, v in run.items()} == {"301": 500, "302": 500, "303": 500}
    assert len(read_run(folder / "results.trunc")["303"]) == 84


def _tied_run(n_queries: int, seed: int = 7):
    """A run whose scores tie a lot (and sometimes rise, as after a rerank)."""
    import random as rnd

    from engine.config import EngineConfig
    from engine.pipeline import Ranked
    from workbench.eval.golden import GoldenItem
    from workbench.eval.metrics import evaluate_query
    from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord

    r = rnd.Random(seed)
    results = []
    for q in range(n_queries):
        docs = r.sample([f"doc{d:04d}" for d in range(400)], 20)
        rel = tuple(r.sample(docs, 2)) if r.random() < 0.9 else ("missing",)
        scores = sorted((round(r.random(), 1) for _ in docs), reverse=True)
        if r.random() < 0.2:
            scores.reverse()  # a reranker may rank a lower fusion score first
        ranked = [Ranked(d, s, None, None, None, None) for d, s in zip(docs, scores, strict=True)]
        item = GoldenItem(id=f"q{q:05d}", query=f"q{q}", relevant=rel)
        metrics = evaluate_query(docs, item.qrels, ["mrr", "ndcg@10", "recall@5"])
        results.append(QueryRecord(item, "hybrid", ranked, metrics, 1.0, [], None))
    cfg = EngineConfig()
    return RunRecord.of(
        cfg,
        results,
        run_id="r",
        created="t",
        dataset=DatasetRef("d", "", "h"),
        split="all",
        modes=("hybrid",),
        rerank=False,
    )


def test_exported_run_reproduces_eval_numbers_in_pytrec_eval(tmp_path) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    from workbench.export.formats import trec_run

    run = _tied_run(3000)
    path = tmp_path / "run.trec"
    path.write_text(trec_run(run, "hybrid"), encoding="utf-8")
    ties = sum(len({it.score for it in r.ranked}) < len(r.ranked) for r in run.for_mode("hybrid"))
    assert ties > 2500  # the case that broke: most queries have tied engine scores
    assert read_run(path) == {
        r.item.id: [it.node_id for it in r.ranked] for r in run.for_mode("hybrid")
    }
    qrels = {r.item.id: dict(r.item.qrels) for r in run.for_mode("hybrid")}
    scores = read_run_scores(path)
    ev = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank", "ndcg_cut.10", "recall.5"})
    per_query = ev.evaluate(scores)
    means = run.means("hybrid")
    n = len(qrels)
    for ours, theirs in (
        ("mrr", "recip_rank"),
        ("ndcg@10", "ndcg_cut_10"),
        ("recall@5", "recall_5"),
    ):
        total = sum(per_query.get(q, {}).get(theirs, 0.0) for q in qrels)
        assert total / n == pytest.approx(means[ours], abs=1e-12), ours


def test_exported_run_refuses_a_repeated_query_id() -> None:
    from workbench.export.formats import trec_run

    run = _tied_run(2)
    first, second = run.queries
    run = run.with_queries([first, replace(second, item=first.item)])
    # The run record refuses to summarise it (its means would merge the two queries) ...
    with pytest.raises(EngineError, match="appears twice"):
        run.to_dict()
    # ... and the TREC writer to write it.
    with pytest.raises(ValueError, match="appears twice"):
        trec_run(run, "hybrid")
    with pytest.raises(ValueError, match="appears twice"):
        format_ranked([("q1", ["a"]), ("q1", ["b"])])
