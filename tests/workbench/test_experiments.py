import dataclasses
import json

import pytest

from engine.config import EngineConfig
from workbench.eval.golden import GoldenItem
from workbench.eval.run_record import DatasetRef, QueryRecord, RunRecord
from workbench.tune.acceptance import decide
from workbench.tune.experiment_log import ExperimentResult, format_log_entry
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.rule import STRICT


def _run(values, lat=10.0, cats=None):
    """values: list of (recall@5, mrr, hit@5) per query."""
    results = []
    for n, (r5, mrr, hit) in enumerate(values):
        item = GoldenItem(
            id=f"q{n:02d}",
            query=f"q{n}",
            relevant=("a",),
            difficulty="medium",
            category=(cats or {}).get(n, "c"),
        )
        m = {"recall@5": r5, "mrr": mrr, "hit@5": hit, "ndcg@10": r5}
        results.append(QueryRecord(item, "hybrid", [], m, lat, [], None))
    return RunRecord.of(
        EngineConfig(),
        results,
        run_id="r",
        created="t",
        dataset=DatasetRef("d", "", "h"),
        split="tune",
        modes=("hybrid",),
        rerank=False,
    )


BASE = [(0.5, 0.5, 1.0)] * 10


def test_accept_at_exact_thresholds():
    # +0.01 recall exactly (one query +0.1 out of 10), MRR -0.02 exactly, latency +100 ms
    cand = list(BASE)
    cand[0] = (0.6, 0.5, 1.0)
    cand[1] = (0.5, 0.3, 1.0)
    d = decide(_run(BASE), _run(cand, lat=110.0), "hybrid", STRICT)
    crit = {c.name: c for c in d.criteria}
    assert crit["recall@5 delta"].value == pytest.approx(0.01)
    assert crit["mrr delta"].value == pytest.approx(-0.02)
    assert crit["latency p50 delta (ms)"].value == pytest.approx(100.0)
    assert d.accepted, d.reasons


def test_reject_just_below_recall_threshold():
    cand = list(BASE)
    cand[0] = (0.59, 0.5, 1.0)
    d = decide(_run(BASE), _run(cand), "hybrid", STRICT)
    assert not d.accepted
    assert any(r.startswith("recall@5 delta") for r in d.reasons)


def test_reject_latency_over_budget():
    cand = [(0.6, 0.5, 1.0)] * 10
    d = decide(_run(BASE), _run(cand, lat=110.01), "hybrid", STRICT)
    assert [c.name for c in d.criteria if not c.passed] == ["latency p50 delta (ms)"]


def test_regressed_queries_limit_and_size():
    cand = [(1.0, 1.0, 1.0)] * 7 + [(0.4, 0.5, 1.0)] * 3  # 3 regressions of 0.1
    d = decide(_run(BASE), _run(cand), "hybrid", STRICT)
    assert len(d.regressed) == 3
    assert "regressed queries" in [c.name for c in d.criteria if not c.passed]
    cand = [(1.0, 1.0, 1.0)] * 9 + [(0.2, 0.5, 1.0)]  # one regression of 0.3 > 0.2
    d = decide(_run(BASE), _run(cand), "hybrid", STRICT)
    assert [c.name for c in d.criteria if not c.passed] == ["largest query regression"]


def test_hit_must_not_drop():
    cand = [(0.7, 0.6, 1.0)] * 9 + [(0.5, 0.5, 0.0)]
    d = decide(_run(BASE), _run(cand), "hybrid", STRICT)
    assert "hit@5 delta" in [c.name for c in d.criteria if not c.passed]


def test_slice_regression_veto():
    cats = {n: ("small" if n < 3 else "big") for n in range(10)}
    base = [(0.5, 0.5, 1.0)] * 10
    cand = [(0.4, 0.5, 1.0)] * 3 + [(0.7, 0.5, 1.0)] * 7  # 'small' slice -0.1 (3 queries)
    rule = dataclasses.replace(STRICT, max_regressed_queries=5)
    d = decide(_run(base, cats=cats), _run(cand, cats=cats), "hybrid", rule)
    assert d.slices["category=small"] == pytest.approx(-0.1)
    assert [c.name for c in d.criteria if not c.passed] == ["worst slice delta (recall@5)"]


def test_gate_mode_tolerates_equal_recall():
    d = decide(_run(BASE), _run(BASE), "hybrid", STRICT, require_improvement=False)
    assert d.accepted
    d = decide(_run(BASE), _run(BASE), "hybrid", STRICT)
    assert not d.accepted


def _result(store, accepted=True, number=1):
    base, cand = EngineConfig(), EngineConfig().with_overrides({"fusion.k": 30})
    d = decide(_run(BASE), _run([(0.7, 0.6, 1.0)] * 10 if accepted else BASE), "hybrid", STRICT)
    return ExperimentResult(
        number,
        "k=30",
        "Tier 1 (quick wins)",
        base.diff(cand),
        d,
        {"recall@5": 0.5},
        {"recall@5": 0.7},
        {},
        {},
        base.hash,
        cand.hash,
        cand.to_yaml(),
        "hybrid",
        date="2026-11-29 12:00",
    )


def test_log_entry_shape():
    text = format_log_entry(_result(None))
    for part in (
        "### Experiment 1: k=30",
        "**Date**",
        "**Strategy tier**",
        "**Change**",
        "**Baseline**",
        "**Result**",
        "**Decision**",
        "**Notes**",
        "Accepted",
    ):
        assert part in text


def test_append_restore_and_crash_recovery(tmp_path, monkeypatch):
    store = ExperimentStore(tmp_path)
    store.ensure_initial_version()
    res = _result(store)
    store.append(res)
    # simulate a crash between logging an accepted experiment and writing the baseline
    assert store.baseline_config().hash == EngineConfig().hash
    msg = store.recover()
    assert msg and "re-applied" in msg
    assert store.baseline_config().fusion.k == 30
    assert store.recover() is None  # idempotent
    recs = store.load_records()
    assert [r["decision"] for r in recs] == ["accepted"]
    assert store.log_md.read_text(encoding="utf-8").count("### Experiment") == 1
    store.restore(0)
    assert store.baseline_config().hash == EngineConfig().hash
    assert store.recover() is None  # a restore after the accept is respected
    assert [v["version"] for v in store.accepted_versions()] == [0, 1]
    with pytest.raises(Exception, match="no baseline version 9"):
        store.restore(9)


def test_append_crash_keeps_old_log(tmp_path, monkeypatch):
    store = ExperimentStore(tmp_path)
    store.append(_result(store))
    before = store.records.read_bytes()
    import os

    monkeypatch.setattr(os, "replace", lambda a, b: (_ for _ in ()).throw(OSError("crash")))
    with pytest.raises(OSError):
        store.append(_result(store, number=2))
    assert store.records.read_bytes() == before
    assert len([json.loads(x) for x in before.decode().splitlines()]) == 1


def test_ranking_key_treats_scaled_rrf_weights_as_one_config():
    from workbench.tune.catalog_walk import _ranking_key

    base = EngineConfig().with_overrides(
        {"fusion.method": "rrf", "fusion.vector_weight": 1.0, "fusion.bm25_weight": 1.0}
    )
    a = base.with_overrides({"fusion.bm25_weight": 2.0})
    b = base.with_overrides({"fusion.vector_weight": 0.5})
    assert _ranking_key(a) == _ranking_key(b) != _ranking_key(base)


def test_the_log_entry_made_from_the_stored_record_is_the_files_and_translates(tmp_path):
    from workbench.tune.experiment_entry import entry_text
    from workbench.tune.experiment_history import log_entry
    from workbench.ui.i18n import catalog

    store = ExperimentStore(tmp_path)
    store.ensure_initial_version()
    res = _result(store, accepted=False)
    store.append(res)
    written = store.log_md.read_text(encoding="utf-8")
    (rec,) = [r for r in store.load_records() if r.get("number") == res.number]
    # from the JSONL record (what the page reads) the entry is the file's, byte for byte
    assert entry_text(rec, rule_name=res.decision.rule.name) in written
    zh = catalog("zh")
    text = log_entry(store, res.number, lambda s: zh.get(s, s))
    assert text is not None and "### 实验 1：" in text and "**决策**：❌ 已回滚" in text
    assert "**Date**" not in text and "(needs" not in text and "Rolled back" not in text
