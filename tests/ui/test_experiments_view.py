"""The Experiments page under a concurrent writer and after an interrupted accept."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from tests.ui.conftest import REPO
from tests.ui.test_pages import open_page, texts
from tests.workbench.test_experiments import _result
from workbench.tune.experiment_store import ExperimentStore
from workbench.ui import state


def test_run_while_another_process_holds_the_lock_shows_who(ui_copy) -> None:
    store_dir = ui_copy["experiments"] / "kb"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from workbench.tune.experiment_store import ExperimentStore\n"
            "with ExperimentStore(sys.argv[1]).lock('experiment try'):\n"
            "    print('held', flush=True); time.sleep(120)",
            str(store_dir),
        ],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        at = open_page("experiments")
        at.selectbox(key=state.EXPERIMENT_KNOB).select("fusion.bm25_weight").run()
        at.number_input(key=state.item_key(state.EXPERIMENT_VALUE, "fusion.bm25_weight")).set_value(
            3.0
        ).run()
        at.button(key=state.EXPERIMENT_RUN).click().run()
        assert not at.exception
        assert "another experiment is running on kb since " in texts(at)
        assert not (store_dir / "experiments.jsonl").exists()
    finally:
        holder.kill()
        holder.wait()


def test_restore_after_an_interrupted_accept_warns_that_it_recovered(ui_copy) -> None:
    store = ExperimentStore(ui_copy["experiments"] / "kb")
    store.ensure_initial_version()
    base = store.baseline_config()
    cand = base.with_overrides({"fusion.k": 30})
    accepted = replace(
        _result(store), base_hash=base.hash, cand_hash=cand.hash, cand_yaml=cand.to_yaml()
    )
    store.append(accepted)  # logged as accepted; the crash hit before the baseline
    at = open_page("experiments")
    at.button(key=state.EXPERIMENT_RESTORE).click().run()
    assert not at.exception
    assert "recovered experiment 1 after an interrupted write: re-applied baseline v1" in texts(at)
    assert [v["version"] for v in store.accepted_versions()] == [0, 1]
