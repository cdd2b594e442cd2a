"""The run record: one typed, versioned definition of what `wikirag eval` saves; old
records migrate, a missing or renamed field fails in one line naming the file and field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import EngineConfig
from tests.workbench.test_report import _run
from workbench.cli import main
from workbench.eval.record_schema import SCHEMA_VERSION, RunRecordError, migrate
from workbench.eval.run_record import RunRecord, latest_run_record, load_run_record, save_run

REPO = Path(__file__).resolve().parents[2]
OLD_RUNS = sorted((REPO / "experiments" / "wiki" / "runs").glob("*.json"))


def _saved(tmp_path: Path) -> Path:
    return save_run(_run(), tmp_path / "experiments" / "wiki" / "runs")


def test_saved_record_carries_the_schema_version_and_loads_back_equal(tmp_path: Path) -> None:
    run = _run()
    path = save_run(run, tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["schema_version"] == SCHEMA_VERSION == 3
    record = load_run_record(path)
    assert record.to_dict() == data == run.to_dict()


def test_a_loaded_record_answers_as_the_run_it_was_saved_from() -> None:
    run = _run()
    back = RunRecord.from_dict(json.loads(json.dumps(run.to_dict())))
    assert back.config == run.config
    assert back.means("hybrid") == run.means("hybrid")
    assert back.mode_summary("hybrid") == run.mode_summary("hybrid")
    assert [r.ranked for r in back.queries] == [r.ranked for r in run.queries]
    assert [r.attribution for r in back.queries] == [r.attribution for r in run.queries]
    assert back.failures("hybrid") == run.failures("hybrid")
    assert [q.item.id for q in back.queries] == [q.item.id for q in run.queries]


def test_typed_readers_answer_what_views_asked_by_key() -> None:
    record = _run()
    q2 = next(q for q in record.queries if q.item.id == "q2")
    assert (q2.first_relevant_rank, q2.cause, q2.top(1)) == (None, "cut_at_k", ["d#x"])
    assert record.mode_summary("hybrid").misses == 2  # q2 cut_at_k, q3 lost_in_both
    assert record.means()["mrr"] == pytest.approx((1.0 + 0.0 + 0.5) / 3)
    assert record.name == "defaults · " + record.created.replace("T", " ")[:16]
    with pytest.raises(RunRecordError, match="has modes hybrid, not keyword"):
        record.mode_summary("keyword")


@pytest.mark.skipif(not OLD_RUNS, reason="no saved wiki runs in experiments/wiki/runs")
@pytest.mark.parametrize("path", OLD_RUNS, ids=lambda p: p.name)
def test_records_saved_before_the_version_existed_still_load(path: Path) -> None:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert "schema_version" not in data  # written by version 1
    record = load_run_record(path)
    assert record.schema_version == SCHEMA_VERSION
    new = {"schema_version", "label"}
    assert {k: v for k, v in record.to_dict().items() if k not in new} == data
    assert record.label  # derived from the config it has
    assert len(record.queries) == len(data["queries"])


def test_migration_adds_the_version_without_touching_the_input() -> None:
    old = {"run_id": "r"}
    assert migrate(old) == {"run_id": "r", "schema_version": 3, "label": "defaults"}
    assert old == {"run_id": "r"}


def test_old_runs_get_a_label_from_their_config() -> None:
    changed = EngineConfig().with_overrides({"fusion.k": 30})
    v2 = {"schema_version": 2, "config_yaml": changed.to_yaml(), "config_hash": changed.hash}
    assert migrate(v2)["label"] == "defaults+fusion.k=30"
    many = EngineConfig().with_overrides(
        {"fusion.k": 30, "fusion.bm25_weight": 0.3, "search.top_k": 7, "rerank.weight": 0.2}
    )
    v2 = {"schema_version": 2, "config_yaml": many.to_yaml(), "config_hash": many.hash}
    assert migrate(v2)["label"] == f"config {many.hash[:6]}"


@pytest.mark.parametrize(
    ("version", "message"),
    [(4, "newer than this wikirag reads"), (0, "not a positive integer"), ("2", "not a positive")],
)
def test_unknown_schema_versions_are_refused(version, message) -> None:
    with pytest.raises(RunRecordError, match=message):
        migrate({"schema_version": version})


def _edited(tmp_path: Path, edit) -> Path:
    path = _saved(tmp_path)
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (lambda d: d.pop("config_hash"), "`config_hash` is missing"),
        (lambda d: d["queries"][1].pop("cause"), "`queries[1].cause` is missing"),
        (
            lambda d: d["queries"][0]["ranked"][0].update(
                node=d["queries"][0]["ranked"][0].pop("node_id")
            ),
            "`queries[0].ranked[0].node_id` is missing",
        ),
        (lambda d: d["summary"]["hybrid"].pop("by_language"), "`summary.hybrid.by_language`"),
        (lambda d: d["dataset"].update(hash=7), "`dataset.hash` is int 7, expected text"),
        (lambda d: d["queries"][2].update(latency_ms="12"), "`queries[2].latency_ms` is str"),
        (lambda d: d["queries"][2]["metrics"].update(mrr=None), "`queries[2].metrics`"),
    ],
    ids=["top", "query", "renamed", "summary", "type", "number", "metric"],
)
def test_a_missing_renamed_or_mistyped_field_names_the_file_and_the_field(
    tmp_path: Path, edit, field
) -> None:
    path = _edited(tmp_path, edit)
    with pytest.raises(RunRecordError) as err:
        load_run_record(path)
    message = str(err.value)
    assert str(path) in message and field in message
    assert "\n" not in message


def test_cli_report_on_a_broken_record_is_one_clear_line(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "wiki").mkdir()
    _edited(tmp_path, lambda d: d["queries"][0].pop("ranked"))
    assert main(["report", "--format", "md", "--no-scorecard"]) == 2
    err = capsys.readouterr().err.strip()
    assert "`queries[0].ranked` is missing" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize(
    ("text", "message"),
    [("{not json", "is not valid JSON"), ("[]", "is not a run record")],
)
def test_files_that_are_not_records_say_so(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "r.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(RunRecordError, match=message):
        load_run_record(path)


def test_latest_record_is_the_newest_file(tmp_path: Path) -> None:
    assert latest_run_record(tmp_path) is None
    save_run(_run(), tmp_path)
    later = _run()
    later.run_id = "20261129-120001-abcdef"
    save_run(later, tmp_path)
    latest = latest_run_record(tmp_path)
    assert latest is not None and latest.run_id == later.run_id
