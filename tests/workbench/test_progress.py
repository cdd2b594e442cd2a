"""StderrBar: the one adapter from a progress callback to a tqdm bar on stderr."""

from __future__ import annotations

from workbench.progress import StderrBar


def test_label_as_description_restarts_the_bar_for_each_stage(capsys) -> None:
    with StderrBar(unit="item") as bar:
        bar(3, 10, "parse")
        assert (bar._bar.n, bar._bar.total, bar._bar.desc) == (3, 10, "parse: ")
        bar(10, 10, "parse")
        bar(2, 5, "embed")  # a new stage counts from zero with its own total
        assert (bar._bar.n, bar._bar.total, bar._bar.desc) == (2, 5, "embed: ")
    out = capsys.readouterr()
    assert out.out == "" and "parse" in out.err  # stdout stays for the command's output


def test_a_fixed_description_shows_the_label_as_postfix(capsys) -> None:
    bar = StderrBar(unit="q", desc="evaluating", total=4)
    bar(1, 4, "q001")
    bar(2, 4, "q002")
    assert (bar._bar.n, bar._bar.desc) == (2, "evaluating")
    assert bar._bar.postfix == "q002"
    bar.close()
    assert capsys.readouterr().out == ""


def test_disabled_bar_draws_nothing(capsys) -> None:
    with StderrBar(disable=True) as bar:
        bar(1, 2, "x")
    assert capsys.readouterr().err == ""
