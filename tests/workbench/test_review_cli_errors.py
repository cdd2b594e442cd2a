"""Bad input files give one readable error line and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.engine.engine_kit import write_kb
from workbench.cli import main


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    write_kb(tmp_path / "kb")
    return tmp_path


def _one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.startswith("wikirag: error: ") and err.count("\n") == 1, err
    return err


def test_golden_grades_not_a_mapping(ws: Path, capsys) -> None:
    (ws / "g.yaml").write_text(
        "name: x\nqueries:\n  - id: q1\n    query: hi\n    relevant: [a]\n    grades: [1, 2]\n",
        encoding="utf-8",
    )
    assert main(["golden", "validate", "--kb", "kb", "--dataset", "g.yaml"]) == 2
    assert "q1" in _one_line_error(capsys)


def test_golden_grade_not_a_number_names_the_query(ws: Path, capsys) -> None:
    (ws / "g.yaml").write_text(
        "name: x\nqueries:\n  - id: q1\n    query: hi\n    relevant: [a]\n    grades: {a: x}\n",
        encoding="utf-8",
    )
    assert main(["golden", "validate", "--kb", "kb", "--dataset", "g.yaml"]) == 2
    assert "q1" in _one_line_error(capsys)


def test_golden_yaml_syntax_error_is_one_line(ws: Path, capsys) -> None:
    (ws / "g.yaml").write_text(
        'name: x\nqueries:\n  - id: q1\n    query: "unterminated\n', encoding="utf-8"
    )
    assert main(["golden", "validate", "--kb", "kb", "--dataset", "g.yaml"]) == 2
    assert "line 4" in _one_line_error(capsys)


def test_golden_not_utf8_names_the_file(ws: Path, capsys) -> None:
    (ws / "g.yaml").write_bytes(b"name: caf\xe9\n")
    assert main(["golden", "validate", "--kb", "kb", "--dataset", "g.yaml"]) == 2
    assert "g.yaml" in _one_line_error(capsys)


def test_config_yaml_syntax_error_is_one_line(ws: Path, capsys) -> None:
    (ws / "bad.yaml").write_text("embedding: [\n  bad", encoding="utf-8")
    assert main(["config", "show", "--kb", "kb", "--config", "bad.yaml"]) == 2
    assert "bad.yaml" in _one_line_error(capsys)


def test_usage_errors_are_one_line(ws: Path, capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--kb", "kb", "--split", "bogus"])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'bogus'" in err, err
    assert "--help" in err
