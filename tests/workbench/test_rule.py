"""Acceptance rule as data: presets, rule.yaml overrides, one-line errors, the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.errors import EngineError
from workbench.tune import rule as rules
from workbench.tune.rule import STATISTICAL, STRICT


def test_default_is_statistical_and_rule_yaml_overrides_its_preset(tmp_path: Path) -> None:
    assert rules.resolve(tmp_path) is STATISTICAL
    (tmp_path / "rule.yaml").write_text("preset: strict\nmax_regressed_queries: 5\n")
    r = rules.resolve(tmp_path)
    assert r.method == "strict" and r.max_regressed_queries == 5 and r.primary == "recall@5"
    assert rules.resolve(tmp_path, "statistical") is STATISTICAL  # --rule wins over the file


def test_rule_file_round_trips_through_its_yaml(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text(
        "primary: ndcg@10\nalpha: 0.01\nslice_by: [difficulty]\nmax_latency_delta_ms: 50\n"
    )
    r = rules.resolve(tmp_path, str(f))
    assert (r.primary, r.alpha, r.slice_by, r.max_latency_delta_ms) == (
        "ndcg@10",
        0.01,
        ("difficulty",),
        50.0,
    )
    again = rules.from_mapping(yaml.safe_load(r.to_yaml()), "again")
    assert again.to_dict()["primary"] == "ndcg@10" and again.slice_by == ("difficulty",)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("primary: map@3\n", "primary must be one of"),
        ("alpha: 0.9\n", "alpha must be in (0, 0.5]"),
        ("alpha: high\n", "alpha must be a float"),
        ("sign_test: 1\n", "sign_test must be a bool"),
        ("min_slice_size: 2.5\n", "min_slice_size must be a int"),
        ("max_regressions: 3\n", "unknown key 'max_regressions'"),
        ("preset: lenient\n", "preset must be one of statistical, strict"),
        ("correction: bonferroni\n", "correction must be one of holm, bh, none"),
        ("slice_by: [mood]\n", "slice_by entries must be among"),
        ("- a\n- b\n", "must be a mapping"),
        ("primary: [\n", "is not valid YAML"),
    ],
)
def test_bad_rule_file_is_one_line_error(tmp_path: Path, text: str, fragment: str) -> None:
    (tmp_path / "rule.yaml").write_text(text)
    with pytest.raises(EngineError) as exc:
        rules.resolve(tmp_path)
    assert fragment in str(exc.value) and "\n" not in str(exc.value)


def test_unknown_rule_choice_names_the_options(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match="--rule must be statistical or strict"):
        rules.resolve(tmp_path, "nonsense")


def test_strict_preset_keeps_the_reference_thresholds() -> None:
    assert (
        STRICT.min_primary_delta,
        STRICT.max_regressed_queries,
        STRICT.max_query_regression,
    ) == (
        0.01,
        2,
        0.2,
    )
    assert "sign_test" not in STRICT.to_dict() and "max_regressed_queries" in STRICT.to_dict()


def test_experiment_rule_command_shows_the_effective_rule(tmp_path, monkeypatch, capsys) -> None:
    from workbench.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# A\n\ntext\n")
    assert main(["experiment", "rule", "--kb", "kb"]) == 0
    out = capsys.readouterr().out
    assert "statistical" in out and "primary: mrr" in out and "correction: holm" in out
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    (tmp_path / "experiments" / "kb" / "rule.yaml").write_text("preset: strict\n")
    assert main(["experiment", "rule", "--kb", "kb"]) == 0
    out = capsys.readouterr().out
    assert "method: strict" in out and "rule.yaml" in out
    assert main(["experiment", "rule", "--kb", "kb", "--rule", "bogus"]) != 0
    assert "--rule must be" in capsys.readouterr().err
