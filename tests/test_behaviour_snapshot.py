"""Restructuring changes no behaviour: the CLI's output on the bundled wiki equals the snapshot.

Covers eval JSON (three channels, answers), every report format, TREC run and qrels, search
in each mode, failures, scorecard, tree, config and index. Timings, dates, run ids and paths
are masked (tests/behaviour_snapshot.py says which and why). A change meant to alter output
regenerates the snapshot with ``python -m tests.behaviour_snapshot --write`` and says so.
"""

from __future__ import annotations

import difflib

import pytest

from tests.behaviour_snapshot import COMMANDS, SNAPSHOT_DIR, generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def outputs() -> dict[str, str]:
    return generate()


def test_snapshot_covers_every_command(outputs: dict[str, str]) -> None:
    expected = {name for name, _ in COMMANDS} | {"run.trec", "qrels.trec"}
    assert set(outputs) == expected
    assert {p.name for p in SNAPSHOT_DIR.iterdir()} == expected


@pytest.mark.parametrize("name", [n for n, _ in COMMANDS] + ["run.trec", "qrels.trec"])
def test_output_equals_snapshot(outputs: dict[str, str], name: str) -> None:
    want = (SNAPSHOT_DIR / name).read_text(encoding="utf-8")
    got = outputs[name]
    if got != want:
        diff = difflib.unified_diff(
            want.splitlines(), got.splitlines(), "snapshot", "now", lineterm="", n=1
        )
        pytest.fail(
            f"{name} differs from tests/snapshots/wiki/{name}:\n" + "\n".join(list(diff)[:40])
        )
