"""Crash recovery must not overwrite a baseline the user edited by hand."""

from __future__ import annotations

from engine.config import EngineConfig
from tests.workbench.test_experiments import _result
from workbench.tune.experiments import ExperimentStore


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
