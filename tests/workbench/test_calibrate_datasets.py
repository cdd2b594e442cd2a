"""`calibrate-refusal --add-dataset/--heldout`: a missing or invalid file is a one-line error
before anything is loaded (no index is needed to find out)."""

from __future__ import annotations

import pytest

GOLDEN = "name: kb\nqueries:\n  - {id: q1, query: hello, relevant: [a.md#a]}\n"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "golden set extra.yaml not found"),
        ("queries: [oops\n", "is not valid YAML"),
        ("queries:\n  - {id: q1, query: x, unanswerable: 'no'}\n", "`unanswerable` must be"),
        ("queries:\n  - {id: q1, query: ''}\n", "is invalid"),
    ],
)
@pytest.mark.parametrize("flag", ["--add-dataset", "--heldout"])
def test_a_bad_extra_dataset_is_one_line_before_the_engine_opens(
    tmp_path, monkeypatch, capsys, content, message, flag
):
    from workbench.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "kb.yaml").write_text(GOLDEN, encoding="utf-8")
    if content is not None:
        (tmp_path / "extra.yaml").write_text(content, encoding="utf-8")
    assert main(["calibrate-refusal", "--kb", "kb", flag, "extra.yaml"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and message in err, err
    assert "no index" not in err  # decided before the (absent) index was needed
