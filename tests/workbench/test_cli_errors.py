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


def test_infinite_top_k_is_one_line(ws: Path, capsys) -> None:
    assert main(["config", "show", "--kb", "kb", "--set", "search.top_k=.inf"]) == 2
    assert "search.top_k must be a finite number" in _one_line_error(capsys)


@pytest.mark.parametrize(
    ("field", "needle"),
    [
        ("relevant: 5", "`relevant` must be a list"),
        ("answer_contains: 7", "`answer_contains` must be a list"),
        ("relevant: [a]\n    grades: {a: 1e999}", "`grades` values must be whole numbers"),
        ("relevant: [a]\n    grades: {a: 2.5}", "`grades` values must be whole numbers"),
    ],
)
def test_golden_field_of_the_wrong_shape_is_one_line(ws: Path, capsys, field, needle) -> None:
    (ws / "g.yaml").write_text(
        f"name: x\nqueries:\n  - id: q1\n    query: hi\n    {field}\n", encoding="utf-8"
    )
    assert main(["golden", "validate", "--kb", "kb", "--dataset", "g.yaml"]) == 2
    err = _one_line_error(capsys)
    assert "q1" in err and needle in err


def test_golden_alias_bomb_is_refused_in_one_line(ws: Path, capsys) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    (ws / "g.yaml").write_text(bomb + "name: x\nqueries: [*i]\n", encoding="utf-8")
    assert main(["golden", "validate", "--kb", "kb", "--dataset", "g.yaml"]) == 2
    assert "aliases" in _one_line_error(capsys)


def test_manifest_that_is_not_an_object_is_one_line(ws: Path, capsys) -> None:
    (ws / ".wikirag" / "kb").mkdir(parents=True)
    (ws / ".wikirag" / "kb" / "manifest.json").write_text("[]", encoding="utf-8")
    assert main(["search", "x", "--kb", "kb", "--set", "embedding.provider=hash"]) == 2
    assert "manifest.json is unreadable" in _one_line_error(capsys)


def test_run_record_that_is_not_an_object_is_one_line(ws: Path, capsys) -> None:
    runs = ws / "experiments" / "kb" / "runs"
    runs.mkdir(parents=True)
    (runs / "r1.json").write_text("[]", encoding="utf-8")
    assert main(["report", "--kb", "kb", "--run", "r1"]) == 2
    assert "is not a run record" in _one_line_error(capsys)


def test_closed_stdout_pipe_exits_quietly(ws: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "workbench.cli", "config", "show", "--kb", "kb"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    proc.stdout.close()  # the reader is gone before the first write, as with `| head -0`
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141 and err == ""
