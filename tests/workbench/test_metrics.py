"""Metrics: trec_eval's own expected outputs, pytrec_eval agreement, hand values, laws."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workbench.eval.hierarchy import hierarchical_credit
from workbench.eval.metrics import (
    DEFAULT_KS,
    Measure,
    aggregate,
    default_measures,
    evaluate_query,
    evaluate_run,
    from_trec_name,
    known_measures,
    parse_measure,
    rank_by_score,
    worst_queries,
)
from workbench.eval.percentiles import latency_percentiles
from workbench.eval.trec import read_qrels, read_run

pytrec_eval = pytest.importorskip("pytrec_eval")


def test_parse_round_trip_and_aliases():
    for m in default_measures():
        assert parse_measure(str(m)) == m
    assert str(parse_measure("ndcg@10")) == "ndcg@10"
    assert parse_measure("P@5") == Measure("precision", 5)
    assert parse_measure("RR") == Measure("mrr")
    assert parse_measure("success@3") == Measure("hit", 3)
    assert parse_measure(" NDCG @ 10 ") == Measure("ndcg", 10)
    assert parse_measure(Measure("map")) == Measure("map")
    assert {str(m) for m in default_measures(ks=[5])} == {
        "mrr", "map", "recall@5", "precision@5", "hit@5", "mrr@5", "ndcg@5", "hrecall@5",
        "hndcg@5",
    }  # fmt: skip
    assert len(default_measures()) == 2 + 7 * len(DEFAULT_KS)


@pytest.mark.parametrize("text", ["bleu@5", "ndcg@", "ndcg@0", "precision", "rprec@5", "@5", ""])
def test_parse_rejects_with_known_names(text):
    with pytest.raises(ValueError) as err:
        parse_measure(text)
    if text == "bleu@5":
        for name in ("precision@K", "recall", "hit@K", "mrr", "ndcg", "hrecall@K", "map"):
            assert name in str(err.value)
    assert any(hint in str(err.value) for hint in ("known", "e.g.", "write"))  # says how to fix


def test_trec_names_map_both_ways():
    for name in ["P_5", "recall_20", "ndcg_cut_10", "success_1", "map_cut_5"]:
        assert from_trec_name(name).trec_name == name
    for name in ["map", "recip_rank", "ndcg", "Rprec", "bpref"]:
        assert from_trec_name(name).trec_name == name
    assert parse_measure("hrecall@5").trec_name is None
    with pytest.raises(ValueError):
        from_trec_name("gm_map")


QRELS = {"r1": 1, "r2": 1, "n1": 0}


def test_hand_values_binary():
    got = evaluate_query(
        ["r1", "x", "r2"],
        QRELS,
        ["ndcg@3", "precision@3", "precision@5", "recall@1", "recall@3", "mrr", "map", "hit@1"],
    )
    assert got["ndcg@3"] == pytest.approx(
        (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3)), abs=1e-15
    )
    assert got["precision@3"] == 2 / 3
    assert got["precision@5"] == 2 / 5  # divided by K even though only 3 were retrieved
    assert got["recall@1"] == 1 / 2
    assert got["recall@3"] == 1.0
    assert got["mrr"] == 1.0
    assert got["map"] == (1 / 1 + 2 / 3) / 2
    assert got["hit@1"] == 1.0


def test_mrr_cutoff_and_hit():
    got = evaluate_query(["a", "b", "c", "r1"], QRELS, ["mrr", "mrr@3", "mrr@4", "hit@3", "hit@4"])
    assert got == {"mrr": 1 / 4, "mrr@3": 0.0, "mrr@4": 1 / 4, "hit@3": 0.0, "hit@4": 1.0}


def test_graded_ndcg_by_hand():
    qrels = {"a": 3, "b": 2, "c": 1, "z": 0}
    got = evaluate_query(["c", "z", "a"], qrels, ["ndcg@3", "ndcg@1", "ndcg"])
    idcg3 = 3 + 2 / math.log2(3) + 1 / math.log2(4)
    assert got["ndcg@3"] == pytest.approx((1 + 3 / math.log2(4)) / idcg3, abs=1e-15)
    assert got["ndcg@1"] == pytest.approx(1 / 3, abs=1e-15)
    assert got["ndcg"] == pytest.approx((1 + 3 / math.log2(4)) / idcg3, abs=1e-15)


def test_negative_grades_give_no_gain():
    got = evaluate_query(["bad", "a"], {"a": 1, "bad": -1}, ["ndcg@2"])
    assert got["ndcg@2"] == pytest.approx(1 / math.log2(3), abs=1e-15)


def test_duplicates_count_once_at_first_position():
    got = evaluate_query(["r1", "r1", "r1", "r2"], QRELS, ["precision@2", "recall@2", "ndcg@2"])
    assert got == {"precision@2": 1.0, "recall@2": 1.0, "ndcg@2": 1.0}


def test_empty_ranking_and_nothing_relevant_score_zero_not_nan():
    for qrels in (QRELS, {"n1": 0}, {}):
        for ranked in ([], ["n1", "x"]):
            got = evaluate_query(ranked, qrels)
            assert all(v == 0.0 for v in got.values() if qrels is not QRELS or not ranked)
            assert not any(math.isnan(v) for v in got.values())


def test_string_is_not_a_ranking():
    with pytest.raises(TypeError):
        evaluate_query("r1", QRELS, ["recall@1"])


# A small tree:  doc -> doc#a -> doc#a/b -> doc#a/b/c ;  doc -> doc#s (sibling branch)
PARENTS = {"doc": None, "doc#a": "doc", "doc#a/b": "doc#a", "doc#a/b/c": "doc#a/b", "doc#s": "doc"}


def test_hrecall_credits():
    rel = {"doc#a/b": 1}
    h = PARENTS
    assert evaluate_query(["doc#a/b"], rel, ["hrecall@1"], h)["hrecall@1"] == 1.0
    assert evaluate_query(["doc#a/b/c"], rel, ["hrecall@1"], h)["hrecall@1"] == 0.5  # child
    assert evaluate_query(["doc#a"], rel, ["hrecall@1"], h)["hrecall@1"] == 0.3  # parent
    assert evaluate_query(["doc"], rel, ["hrecall@1"], h)["hrecall@1"] == 0.3  # grandparent
    assert evaluate_query(["doc#s"], rel, ["hrecall@1"], h)["hrecall@1"] == 0.0  # sibling branch
    # best credit within the top K wins; beyond K counts nothing
    assert evaluate_query(["doc#a", "doc#a/b/c"], rel, ["hrecall@2"], h)["hrecall@2"] == 0.5
    assert evaluate_query(["doc#a", "doc#a/b/c"], rel, ["hrecall@1"], h)["hrecall@1"] == 0.3
    # averaged over relevant nodes: one exact, one via its child
    two = {"doc#a/b": 1, "doc#s": 1}
    got = evaluate_query(["doc#s", "doc#a/b/c"], two, ["hrecall@2", "recall@2"], h)
    assert got == {"hrecall@2": (1.0 + 0.5) / 2, "recall@2": 0.5}
    # a callable hierarchy works the same; no hierarchy = recall
    assert evaluate_query(["doc#a"], rel, ["hrecall@1"], PARENTS.get)["hrecall@1"] == 0.3
    assert evaluate_query(["doc#a"], rel, ["hrecall@1"])["hrecall@1"] == 0.0


def test_hierarchy_cycle_does_not_hang():
    assert hierarchical_credit("a", ["c"], {"a": "b", "b": "a", "c": "c"}) == 0.0


def test_rank_by_score_breaks_ties_by_docid_descending():
    assert rank_by_score({"a": 1.0, "c": 1.0, "b": 2.0, "d": 0.5}) == ["b", "c", "a", "d"]
    with pytest.raises(ValueError):
        rank_by_score({"a": float("nan")})


def test_evaluate_run_conventions():
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"c": 0}}
    run = {"q1": ["a"], "q3": ["c"], "q9": ["a"]}
    ev = evaluate_run(run, qrels, ["recall@1"])
    assert ev.per_query == {"q1": {"recall@1": 1.0}, "q2": {"recall@1": 0.0}}
    assert ev.means == {"recall@1": 0.5}
    assert set(ev.skipped) == {"q3", "q9"}
    trec = evaluate_run(run, qrels, ["recall@1"], count_queries_without_relevant=True)
    assert trec.means == {"recall@1": 1 / 3}
    assert evaluate_run({}, {}, ["recall@1"]).means == {"recall@1": 0.0}


def test_aggregate_worst_and_latency():
    per_query = {
        "q1": {"mrr": 1.0},
        "q2": {"mrr": 0.5},
        "q3": {"mrr": 0.0},
        "q4": {"mrr": 0.0},
    }
    groups = {"q1": "easy", "q2": "easy", "q3": "hard"}
    assert aggregate(per_query, groups) == {
        "(none)": {"mrr": 0.0},
        "easy": {"mrr": 0.75},
        "hard": {"mrr": 0.0},
    }
    assert aggregate(per_query, groups, missing=None) == {
        "easy": {"mrr": 0.75},
        "hard": {"mrr": 0.0},
    }
    assert worst_queries(per_query, "mrr", 3) == [("q3", 0.0), ("q4", 0.0), ("q2", 0.5)]
    assert latency_percentiles([10, 20, 30, 40]) == {"p50": 25.0, "p95": 38.5}
    assert latency_percentiles([]) == {"p50": 0.0, "p95": 0.0}


def test_known_measures_lists_every_name():
    assert len(known_measures()) == 10


# trec_eval's own expected outputs


def _expected(path: Path) -> dict[tuple[str, str], str]:
    out = {}
    for line in path.read_text().splitlines():
        measure, qid, value = line.split()
        out[(measure, qid)] = value
    return out


TREC_CASES = [
    # qrels, results, expected output, relevance level, trec_eval convention on empty queries
    ("qrels.test", "results.test", "out.test", 1),
    ("qrels.test.with-comments", "results.test", "out.test", 1),
    ("qrels.test", "results.test", "out.test.aq", 1),  # -q: per query, all_trec
    (
        "qrels.test",
        "results.trunc",
        "out.test.aqc",
        1,
    ),  # -c: a judged query missing from the run is 0
    ("qrels.rel_level", "results.test", "out.test.aql", 2),  # -l2, graded qrels with -1..4
    ("qrels.comment.test", "results.comment.test", "out.comment.test", 1),
]


@pytest.mark.parametrize(("qrels_file", "run_file", "out_file", "level"), TREC_CASES)
def test_reproduces_trec_eval_expected_output(shared_data, qrels_file, run_file, out_file, level):
    folder = shared_data / "benchmarks" / "trec_eval-test"
    expected = _expected(folder / out_file)
    measures: dict[str, Measure] = {}
    for name, _ in expected:
        try:
            measures[name] = from_trec_name(name)
        except ValueError:
            continue  # a trec_eval measure we do not implement (gm_map, iprec_at_recall...)
    ev = evaluate_run(
        read_run(folder / run_file),
        read_qrels(folder / qrels_file),
        list(measures.values()),
        relevance_level=level,
        count_queries_without_relevant=True,  # trec_eval's convention
    )
    assert str(len(ev.per_query)) == expected[("num_q", "all")]
    checked = 0
    for (name, qid), value in expected.items():
        if name not in measures:
            continue
        row = ev.means if qid == "all" else ev.per_query[qid]
        assert f"{row[str(measures[name])]:.4f}" == value, (out_file, name, qid)
        checked += 1
    assert checked >= 13


def test_trec_eval_measures_covered(shared_data):
    out = _expected(shared_data / "benchmarks" / "trec_eval-test" / "out.test.aq")
    names = {name for name, _ in out}
    ours = set()
    for name in names:
        try:
            from_trec_name(name)
            ours.add(name)
        except ValueError:
            pass
    assert {
        "map",
        "recip_rank",
        "P_5",
        "recall_5",
        "ndcg_cut_10",
        "success_5",
        "Rprec",
        "bpref",
    } <= ours
    assert len(ours) == 44


# Agreement with pytrec_eval on random runs and graded qrels

PYTREC_MEASURES = {
    "P.1,3,5,10,20",
    "recall.1,3,5,10,20",
    "ndcg_cut.1,3,5,10,20",
    "success.1,5,10",
    "map_cut.5,10",
    "recip_rank",
    "map",
    "ndcg",
    "Rprec",
    "bpref",
}


def _random_case(rng: random.Random) -> tuple[dict, dict]:
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for q in range(40):
        qid = f"q{q}"
        pool = [f"d{i:02d}" for i in range(rng.randint(1, 40))]
        judged = rng.sample(pool, rng.randint(1, len(pool)))
        qrels[qid] = {d: rng.choice([0, 0, 0, 1, 1, 2, 3]) for d in judged}
        retrieved = rng.sample(pool, rng.randint(1, len(pool)))
        # few distinct scores, so ties are common
        run[qid] = {d: float(rng.randint(0, 5)) / 2 for d in retrieved}
    return qrels, run


@pytest.mark.parametrize("seed", range(5))
def test_agrees_with_pytrec_eval(seed):
    qrels, run = _random_case(random.Random(seed))
    theirs = pytrec_eval.RelevanceEvaluator(qrels, PYTREC_MEASURES).evaluate(run)
    compared = 0
    for qid, values in theirs.items():
        ours = evaluate_query(
            rank_by_score(run[qid]), qrels[qid], [from_trec_name(name) for name in values]
        )
        for name, value in values.items():
            assert ours[str(from_trec_name(name))] == pytest.approx(value, abs=1e-9), (qid, name)
            compared += 1
    assert compared > 40 * 20


# Laws

doc_ids = st.text(alphabet="abcdefgh", min_size=1, max_size=2)
rankings = st.lists(doc_ids, max_size=15)
qrels_st = st.dictionaries(doc_ids, st.integers(min_value=-1, max_value=3), max_size=12)
ALL = default_measures() + tuple(
    parse_measure(m) for m in ["recall", "ndcg", "map@5", "rprec", "bpref", "mrr@3"]
)


@settings(max_examples=200, deadline=None)
@given(rankings, qrels_st)
def test_every_measure_within_unit_interval(ranked, qrels):
    for name, value in evaluate_query(ranked, qrels, ALL, PARENTS).items():
        assert 0.0 <= value <= 1.0 + 1e-12, name
        assert not math.isnan(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(doc_ids, st.integers(min_value=1, max_value=3), min_size=1, max_size=8))
def test_perfect_ranking_scores_one(qrels):
    ideal = sorted(qrels, key=lambda d: qrels[d], reverse=True)
    got = evaluate_query([*ideal, "zz"], qrels, ALL)
    for k in DEFAULT_KS:
        assert got[f"ndcg@{k}"] == pytest.approx(1.0)
        assert got[f"hit@{k}"] == 1.0
        assert got[f"mrr@{k}"] == 1.0
        if k >= len(qrels):
            assert got[f"recall@{k}"] == 1.0
            assert got[f"hrecall@{k}"] == 1.0
    assert got["mrr"] == got["map"] == got["ndcg"] == got["rprec"] == 1.0


@settings(max_examples=200, deadline=None)
@given(rankings, qrels_st, st.randoms(use_true_random=False))
def test_shuffling_below_last_relevant_changes_nothing(ranked, qrels, rnd):
    ranked = list(dict.fromkeys(ranked))
    rel_positions = [i for i, d in enumerate(ranked) if qrels.get(d, 0) > 0]
    cut = rel_positions[-1] + 1 if rel_positions else 0
    tail = ranked[cut:]
    rnd.shuffle(tail)
    # hrecall credits non-relevant neighbours of relevant nodes, so it is exempt
    measures = [m for m in ALL if m.name != "hrecall"]
    assert evaluate_query(ranked, qrels, measures) == evaluate_query(
        ranked[:cut] + tail, qrels, measures
    )


@given(qrels_st)
def test_empty_ranking_is_zero(qrels):
    assert set(evaluate_query([], qrels, ALL, PARENTS).values()) <= {0.0}


@given(st.dictionaries(doc_ids, st.integers(min_value=-3, max_value=3), max_size=10))
def test_rank_by_score_is_sorted(scores):
    ranked = rank_by_score(scores)
    keys = [(scores[d], d) for d in ranked]
    assert keys == sorted(keys, reverse=True)


# The `wikirag metrics` command


@pytest.fixture
def trec_files(tmp_path):
    (tmp_path / "qrels").write_text("q1 0 a 1\nq1 0 b 0\nq2 0 c 2\nq3 0 z 0\n")
    (tmp_path / "run").write_text("q1 Q0 b 1 2.0 t\nq1 Q0 a 2 1.0 t\nq2 Q0 c 1 5 t\n")
    return tmp_path


def test_cli_table(trec_files, capsys):
    from workbench.cli import main

    rc = main(["metrics", "--qrels", str(trec_files / "qrels"), "--run", str(trec_files / "run"),
               "--measures", "mrr", "P@1"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert out.splitlines()[:3] == [
        "measure      value",
        "mrr          0.7500",
        "precision@1  0.5000",
    ]
    assert "2 queries evaluated, 1 skipped" in out


def test_cli_json_per_query(trec_files, capsys):
    import json

    from workbench.cli import main

    rc = main(["metrics", "--qrels", str(trec_files / "qrels"), "--run", str(trec_files / "run"),
               "--measures", "mrr", "--per-query", "--json"])  # fmt: skip
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["means"] == {"mrr": 0.75}
    assert data["per_query"] == {"q1": {"mrr": 0.5}, "q2": {"mrr": 1.0}}
    assert data["skipped"] == ["q3"]


def test_cli_per_query_table(trec_files, capsys):
    from workbench.cli import main

    main(["metrics", "--qrels", str(trec_files / "qrels"), "--run", str(trec_files / "run"),
          "--measures", "mrr", "--per-query"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:4] == [
        "mrr      q1     0.5000",
        "mrr      q2     1.0000",
        "mrr      all    0.7500",
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--run", "absent"], "no such file"),
        (["--measures", "bleu"], "known measures"),
    ],
)
def test_cli_errors_are_one_line_exit_2(trec_files, capsys, args, message):
    from workbench.cli import main

    base = {"--qrels": str(trec_files / "qrels"), "--run": str(trec_files / "run")}
    argv = ["metrics"]
    for flag, value in base.items():
        if flag not in args:
            argv += [flag, value]
    argv += [a if a != "absent" else str(trec_files / "absent") for a in args]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1


def test_cli_malformed_line(trec_files, capsys):
    from workbench.cli import main

    (trec_files / "run").write_text("q1 Q0 a 1 1.0 t\nq1 Q0 b 2\n")
    assert (
        main(["metrics", "--qrels", str(trec_files / "qrels"), "--run", str(trec_files / "run")])
        == 2
    )
    assert f"{trec_files / 'run'}:2: expected 6 columns" in capsys.readouterr().err


def test_percentile_is_numpy_linear_type_7() -> None:
    import numpy as np

    from workbench.eval.percentiles import percentile

    assert percentile([10, 20, 30, 40], 50) == 25.0
    assert percentile(range(1, 21), 95) == pytest.approx(19.05)  # nearest-rank would say 19
    rng = np.random.default_rng(3)
    for n in (1, 2, 7, 100):
        xs = rng.exponential(20, n).tolist()
        for p in (0, 5, 50, 95, 99, 100):
            assert percentile(xs, p) == pytest.approx(np.percentile(xs, p, method="linear"))
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError, match="within"):
        percentile([1.0], 101)


def test_every_latency_summary_uses_the_same_percentile() -> None:
    from workbench.answer.answer_metrics import aggregate_answer_scores
    from workbench.bench.measure import percentiles as bench_percentiles
    from workbench.eval.percentiles import latency_percentiles, percentile

    lat = [float(x) for x in range(1, 21)]
    want = {"p50": percentile(lat, 50), "p95": percentile(lat, 95)}
    assert latency_percentiles(lat) == want
    bench = bench_percentiles(lat)
    assert (bench["p50"], bench["p95"]) == (round(want["p50"], 3), round(want["p95"], 3))
    assert bench["p95"] == 19.05
    rows = [{"latency_ms": x, "refused": 0.0, "refusal_correct": 1.0} for x in lat]
    agg = aggregate_answer_scores(rows)
    assert (agg["latency_ms_p50"], agg["latency_ms_p95"]) == (want["p50"], want["p95"])


def test_no_second_percentile_implementation() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    hits = []
    pattern = re.compile(r"np\.(percentile|quantile|median)\(|statistics\.(median|quantiles)\(")
    for path in [*root.glob("workbench/**/*.py"), *root.glob("engine/**/*.py")]:
        if pattern.search(path.read_text(encoding="utf-8")):
            hits.append(path.relative_to(root).as_posix())
    assert hits == []
