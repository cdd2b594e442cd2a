"""Every YAML file the project reads goes through engine/yaml_safe.py: an alias bomb in
rule.yaml or refusal.yaml costs (almost) nothing and is one short line naming the file, and
values are type-checked where the schema says (golden sets, the refusal calibration)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import ConfigError
from engine.yaml_safe import MAX_MESSAGE, load_file
from workbench.answer.refusal import load_model
from workbench.eval import golden
from workbench.tune import rule

REPO = Path(__file__).resolve().parents[2]
# 9 levels of 9 references: 9**9 (387 million) strings once expanded by a plain safe_load
BOMB = (
    "a: &a ["
    + ", ".join(["'" + "x" * 64 + "'"] * 9)
    + "]\n"
    + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
)


def _measured(args: list[str], cwd: Path) -> tuple[int, str, float, int]:
    """(exit code, stderr, seconds, peak RSS in KiB) of one child, from its own rusage."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        args,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, err, time.perf_counter() - start, usage.ru_maxrss


@pytest.fixture
def kb_dir(tmp_path: Path) -> Path:
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    return tmp_path


@pytest.mark.slow
@pytest.mark.parametrize("which", ["rule.yaml", "refusal.yaml"])
def test_an_alias_bomb_costs_little_and_names_the_file(kb_dir: Path, which: str) -> None:
    """The issue's bar: under 10 s and under 150 MB more than the same command on a file
    without the bomb, and the message names the file."""
    target = kb_dir / "experiments" / "kb" / which
    if which == "rule.yaml":
        cmd = [sys.executable, "-m", "workbench.cli", "experiment", "rule", "--kb", "kb"]
        plain = "preset: statistical\n"
    else:
        code = "import sys, pathlib; from workbench.answer.refusal import load_model as m; m(pathlib.Path(sys.argv[1]))"
        cmd = [sys.executable, "-c", code, str(target)]
        plain = "features: []\n"
    target.write_text(plain, encoding="utf-8")
    _, _, base_s, base_kb = _measured(cmd, kb_dir)
    target.write_text(BOMB, encoding="utf-8")
    rc, err, bomb_s, bomb_kb = _measured(cmd, kb_dir)
    assert rc != 0
    line = err.strip().splitlines()[-1]
    assert str(Path("experiments") / "kb" / which) in line and "aliases" in line, line
    assert len(line) < MAX_MESSAGE + 40
    assert bomb_s - base_s < 10.0
    assert (bomb_kb - base_kb) / 1024 < 150, (base_kb, bomb_kb)


@pytest.mark.parametrize("reader", [rule.load, load_model, load_file])
def test_the_readers_refuse_aliases_before_building_anything(tmp_path: Path, reader) -> None:
    path = tmp_path / "x.yaml"
    path.write_text(BOMB, encoding="utf-8")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match=r"line 2: YAML aliases \(\*a\) are not allowed") as exc:
        reader(path)
    assert time.perf_counter() - start < 1.0
    assert str(path) in str(exc.value) and len(str(exc.value)) <= 400


@pytest.mark.parametrize("reader", [rule.load, load_model])
def test_syntax_errors_are_one_capped_line_naming_the_file(tmp_path: Path, reader) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("primary: '" + "y" * 100_000 + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not valid YAML") as exc:
        reader(path)
    msg = str(exc.value)
    assert str(path) in msg and "\n" not in msg and len(msg) <= MAX_MESSAGE


CALIBRATION = (
    "features: [top_cosine]\nmean: [0.5]\nscale: [0.1]\nweights: [{w}]\nbias: 0.0\n"
    "refuse_below: 0.5\ngrey_low: 0.4\ngrey_high: 0.6\n"
)


@pytest.mark.parametrize("bad", [".nan", ".inf", "-.inf"])
def test_a_non_finite_refusal_weight_is_refused_at_load(tmp_path: Path, bad: str) -> None:
    path = tmp_path / "refusal.yaml"
    path.write_text(CALIBRATION.format(w=bad), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"must be finite") as exc:
        load_model(path)
    assert str(path) in str(exc.value)
    path.write_text(CALIBRATION.format(w="1.5"), encoding="utf-8")
    assert load_model(path).weights == (1.5,)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            'unanswerable: "false"',
            r"`unanswerable` must be true or false \(unquoted\), got 'false'",
        ),
        ("unanswerable: 1", r"`unanswerable` must be true or false"),
        ("query: [a, b]", r"`query` must be a string, got \['a', 'b'\]"),
        ("query: {a: 1}", r"`query` must be a string"),
    ],
)
def test_golden_values_are_type_checked(line: str, message: str) -> None:
    text = f"name: t\nqueries:\n  - id: q1\n    query: hello\n    {line}\n"
    text = text.replace("    query: hello\n    query:", "    query:")
    with pytest.raises(golden.GoldenSetError, match=message):
        golden.parse(text)


def test_real_booleans_and_strings_still_load() -> None:
    gs = golden.parse(
        "name: t\nqueries:\n  - {id: q1, query: hi, unanswerable: false}\n"
        "  - {id: q2, query: 2024, unanswerable: true}\n"
    )
    assert [(i.query, i.unanswerable) for i in gs.items] == [("hi", False), ("2024", True)]
