"""The experiments folder under concurrency, crashes and hostile titles (issue 12, 1-3).

Concurrency is tested with real processes: a lock that only works within one process
would pass an in-process test and still lose an accepted change between two terminals.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from engine.config import EngineConfig
from tests.engine.engine_kit import write_kb
from tests.workbench.test_evaluate import GOLDEN
from tests.workbench.test_experiments import _result, _run
from workbench.tune.experiment_store import ExperimentBusyError, ExperimentStore
from workbench.tune.experiments import run_experiment
from workbench.workspace import resolve

REPO = Path(__file__).resolve().parents[2]


class _FakeEvaluator:
    """Scores a config by how many keys it changes from the defaults: each change helps.

    The first ``run`` touches ``started`` (the test knows the lock is held), then sleeps
    ``delay`` seconds or until ``<started>.release`` exists, widening the read-baseline ...
    write-baseline window a race needs.
    """

    def __init__(self, cfg: EngineConfig, started: Path | None, delay: float) -> None:
        self.quality = min(0.9, 0.3 + 0.2 * len(EngineConfig().diff(cfg)))
        self.started, self.delay = started, delay

    def run(self, gs, cfg, modes, split):
        if self.started is not None and not self.started.exists():
            self.started.write_text("1", encoding="utf-8")
            end = time.monotonic() + self.delay
            release = self.started.with_suffix(".release")
            while time.monotonic() < end and not release.exists():
                time.sleep(0.05)
        q = self.quality
        return _run([(q, q, 1.0)] * 10)


def fake_evaluator_for(started: Path | None = None, delay: float = 0.0):
    return lambda cfg: _FakeEvaluator(cfg, started, delay)


def try_change(key: str, value: str, delay: float, started: str) -> int:
    """What one `wikirag experiment try` process does, with the fake evaluator."""
    try:
        res = run_experiment(
            resolve("kb"),
            fake_evaluator_for(Path(started) if started else None, delay),
            {key: float(value)},
            notify=lambda m: sys.stderr.write(m + "\n"),
        )
    except ExperimentBusyError as exc:
        sys.stderr.write(f"busy: {exc}\n")
        return 3
    return 0 if res.decision.accepted else 1


def _spawn(cwd: Path, key: str, value: str, delay: float = 0.0, started: str = ""):
    code = (
        "import sys; from tests.workbench.test_experiments_store import try_change; "
        "sys.exit(try_change(*sys.argv[1:3], float(sys.argv[3]), sys.argv[4]))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-c", code, key, value, str(delay), started],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_kb(tmp_path / "kb")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(GOLDEN, encoding="utf-8")
    return tmp_path


def _wait_for(path: Path, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if proc.poll() is not None:
            raise AssertionError(f"process ended early: {proc.communicate()}")
        assert time.monotonic() < end, "the first experiment never started"
        time.sleep(0.05)


def test_second_experiment_while_one_runs_is_refused_and_nothing_is_lost(ws: Path) -> None:
    started = ws / "started"
    first = _spawn(ws, "fusion.k", "30", delay=120.0, started=str(started))
    _wait_for(started, first)
    second = _spawn(ws, "search.top_k", "7")
    _, err2 = second.communicate(timeout=120)
    started.with_suffix(".release").touch()  # only now may the first one write
    _, err1 = first.communicate(timeout=120)
    assert first.returncode == 0, err1
    assert second.returncode == 3, err2
    assert "another experiment is running on kb since " in err2
    assert "(experiment try, pid " in err2
    store = ExperimentStore(ws / "experiments" / "kb")
    assert store.baseline_config().fusion.k == 30
    # Run again after the first finished: decided against the new baseline, keeps k=30.
    third = _spawn(ws, "search.top_k", "7")
    assert third.wait(timeout=120) == 0, third.communicate()
    final = store.baseline_config()
    assert (final.fusion.k, final.search.top_k) == (30, 7)
    recs = store.load_records()
    assert [r["number"] for r in recs] == [1, 2]
    assert recs[1]["baseline"]["hash"] == recs[0]["result"]["hash"]
    assert store.log_md.read_text(encoding="utf-8").count("### Experiment ") == 2
    assert [v["version"] for v in store.accepted_versions()] == [0, 1, 2]


def test_simultaneous_experiments_keep_log_records_and_baseline_consistent(ws: Path) -> None:
    changes = [("fusion.k", "30"), ("search.top_k", "7"), ("fusion.multiplier", "5")]
    procs = [
        _spawn(ws, k, v, delay=0.5, started=str(ws / f"s{i}")) for i, (k, v) in enumerate(changes)
    ]
    codes = [p.wait(timeout=180) for p in procs]
    assert all(c in (0, 3) for c in codes), [p.communicate() for p in procs]
    assert codes.count(0) >= 1
    store = ExperimentStore(ws / "experiments" / "kb")
    recs = store.load_records()
    assert len(recs) == codes.count(0)
    assert [r["number"] for r in recs] == list(range(1, len(recs) + 1))
    for before, after in itertools.pairwise(recs):  # each decided on the last accept
        assert after["baseline"]["hash"] == before["result"]["hash"]
    assert store.baseline_config().hash == recs[-1]["result"]["hash"]
    log = store.log_md.read_text(encoding="utf-8")
    assert log.count("# Optimization log") == 1 and log.count("### Experiment ") == len(recs)


def test_cli_try_is_refused_with_who_holds_the_lock(ws: Path, capsys) -> None:
    from workbench.cli import main

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from workbench.tune.experiment_store import ExperimentStore\n"
            "with ExperimentStore('experiments/kb').lock('optimize'):\n"
            "    print('held', flush=True); time.sleep(60)",
        ],
        cwd=ws,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        for argv in (
            ["experiment", "try", "--kb", "kb", "--set", "fusion.k=30"],
            ["experiment", "restore", "--kb", "kb", "0"],
            ["optimize", "--kb", "kb", "--trials", "1", "--yes"],
        ):
            assert main(argv) == 2
            err = capsys.readouterr().err
            assert err.startswith("wikirag: error: another experiment is running on kb since ")
            assert "(optimize, pid " in err and err.count("\n") == 1
    finally:
        holder.kill()
        holder.wait()


def test_two_threads_exclude_each_other_and_one_thread_reenters(tmp_path: Path) -> None:
    store = ExperimentStore(tmp_path)
    inside, release, errors = threading.Event(), threading.Event(), []

    def hold() -> None:
        with store.lock("ui session 1"), store.lock("nested"):  # re-entrant in one thread
            inside.set()
            release.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    assert inside.wait(10)
    try:
        with store.lock("ui session 2"):
            errors.append("second thread got the lock")
    except ExperimentBusyError as exc:
        assert "ui session 1" in str(exc)
    release.set()
    t.join()
    assert errors == []
    with store.lock("after"):  # released
        pass


def test_recovery_after_crash_between_version_file_and_baseline_adds_no_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import workbench.tune.experiment_store as ex

    (tmp_path / "kb").mkdir()
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(GOLDEN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    real = ex.atomic_write_text

    def crash_on_baseline(path, text):
        p = Path(path)
        if p.name == "baseline.yaml" and (p.parent / "baselines" / "v1.yaml").exists():
            raise KeyboardInterrupt  # the process dies here
        return real(path, text)

    monkeypatch.setattr(ex, "atomic_write_text", crash_on_baseline)
    with pytest.raises(KeyboardInterrupt):
        run_experiment(resolve("kb"), fake_evaluator_for(), {"fusion.k": 30.0})
    monkeypatch.setattr(ex, "atomic_write_text", real)
    store = ExperimentStore(tmp_path / "experiments" / "kb")
    assert store.baseline_config().fusion.k == 60  # the crash left the old baseline
    said: list[str] = []
    run_experiment(resolve("kb"), fake_evaluator_for(), {"search.top_k": 7}, notify=said.append)
    assert said == ["recovered experiment 1 after an interrupted write: re-applied baseline v1"]
    assert [v["version"] for v in store.accepted_versions()] == [0, 1, 2]
    assert EngineConfig.load(store.versions / "v1.yaml").fusion.k == 30
    final = store.baseline_config()
    assert (final.fusion.k, final.search.top_k) == (30, 7)
    assert store.recover() is None  # idempotent


def test_recovery_writes_a_missing_log_entry_once(tmp_path: Path, monkeypatch) -> None:
    store = ExperimentStore(tmp_path)
    store.ensure_initial_version()
    monkeypatch.setattr(store, "_append_log", lambda entry: (_ for _ in ()).throw(OSError("x")))
    with pytest.raises(OSError):
        store.append(_result(store))  # record written, log entry lost
    monkeypatch.undo()
    msg = store.recover()
    assert msg and "wrote its missing log entry" in msg and "re-applied baseline v1" in msg
    assert store.recover() is None
    log = store.log_md.read_text(encoding="utf-8")
    assert log.count("### Experiment 1: k=30") == 1
    assert [v["version"] for v in store.accepted_versions()] == [0, 1]


def test_cli_reports_recovery_on_stderr(ws: Path, capsys) -> None:
    from workbench.cli import main

    store = ExperimentStore(ws / "experiments" / "kb")
    store.ensure_initial_version()
    store.append(_result(store))  # accepted and logged; the crash hit before the baseline
    assert main(["experiment", "restore", "--kb", "kb", "0"]) == 0
    err = capsys.readouterr().err
    assert "recovered experiment 1 after an interrupted write: re-applied baseline v1" in err
    assert [v["version"] for v in store.accepted_versions()] == [0, 1]
    assert store.baseline_config() == EngineConfig()  # then the restore itself


@pytest.mark.parametrize(
    "forged",
    [
        "k=30\n\n### Experiment 99: forged\n\n- **Decision**: ✅ Accepted — new baseline",
        "k=30\r### Experiment 99: forged",
        "k=30\u2028### Experiment 99: forged",
    ],
)
def test_title_and_notes_cannot_forge_log_entries(ws: Path, forged: str) -> None:
    res = run_experiment(
        resolve("kb"), fake_evaluator_for(), {"fusion.k": 30.0}, title=forged, notes=forged
    )
    assert "\n" not in res.title and "\r" not in res.title
    log = (ws / "experiments" / "kb" / "optimization_log.md").read_text(encoding="utf-8")
    headings = [ln for ln in log.splitlines() if ln.startswith("### ")]
    assert headings == [f"### Experiment 1: {res.title}"]
    assert res.title.startswith("k=30 ### Experiment 99: forged")


# Crash recovery must not overwrite a baseline the user edited by hand.


def test_recover_keeps_a_hand_edited_baseline(tmp_path) -> None:
    store = ExperimentStore(tmp_path)
    store.ensure_initial_version()
    store.append(_result(store))
    store.write_baseline(EngineConfig().with_overrides({"fusion.k": 30}))  # accepted, no crash
    edited = EngineConfig().with_overrides({"fusion.k": 45, "search.top_k": 7})
    store.baseline.write_text(edited.to_yaml(), encoding="utf-8")  # the user's own edit
    assert store.recover() is None
    assert store.baseline_config() == edited
    assert [v["version"] for v in store.accepted_versions()] == [0, 1]


def test_stray_files_in_baselines_folder_are_ignored(tmp_path) -> None:
    store = ExperimentStore(tmp_path)
    store.ensure_initial_version()
    (store.versions / "v1-old.yaml").write_text(EngineConfig().to_yaml(), encoding="utf-8")
    (store.versions / "very.yaml").write_text(EngineConfig().to_yaml(), encoding="utf-8")
    assert [v["version"] for v in store.accepted_versions()] == [0]
    assert store.write_baseline(EngineConfig().with_overrides({"fusion.k": 30})) == 1


def test_read_only_commands_never_use_a_baseline_a_crash_left_stale(ws: Path, capsys) -> None:
    from workbench.cli import main

    store = ExperimentStore(ws / "experiments" / "kb")
    store.ensure_initial_version()
    store.append(_result(store))  # accepted and logged; the crash hit before the baseline
    assert store.baseline_config().fusion.k == 60
    assert main(["experiment", "versions", "--kb", "kb"]) == 0
    assert "re-applied baseline v1" in capsys.readouterr().err
    assert store.baseline_config().fusion.k == 30
    assert main(["config", "show", "--kb", "kb"]) == 0  # nothing more to do: silent
    captured = capsys.readouterr()
    assert "recovered" not in captured.err and "fusion" in captured.out


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("[1, 2]", "a JSON list, not an object"),
        ('{"number": "one"}', "'number' is 'one'"),
        ('{"decision": "accepted", "number": 1}', "needs 'number' and 'config_yaml'"),
        ('{"baseline": 5}', "'baseline' is 5"),
    ],
)
def test_a_record_of_the_wrong_shape_is_one_line_naming_file_and_line(
    tmp_path: Path, line: str, message: str
) -> None:
    from engine.errors import EngineError

    store = ExperimentStore(tmp_path)
    store.records.write_text('{"number": 1, "decision": "rejected"}\n' + line + "\n")
    with pytest.raises(EngineError) as exc:
        store.load_records()
    msg = str(exc.value)
    assert f"{store.records}:2 is not an experiment record" in msg and message in msg
    assert "\n" not in msg
