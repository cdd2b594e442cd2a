"""`wikirag ask --save` keeps turns; `wikirag chats` lists, shows, exports, replays them."""

from __future__ import annotations

import json

from tests.workbench.test_chat import Q_CHUNK, cli_env  # noqa: F401  (fixture)


def test_ask_save_then_list_show_export_replay(cli_env, capsys):  # noqa: F811
    from workbench.cli import main

    assert main(["ask", Q_CHUNK, "--kb", "kb", "--save"]) == 0
    err = capsys.readouterr().err
    cid = err.split("conversation ")[1].split()[0]
    assert main(["ask", "那固定长度呢？", "--kb", "kb", "--save", cid]) == 0
    capsys.readouterr()
    assert main(["chats", "list", "--kb", "kb", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(c["id"], c["turns"]) for c in listed] == [(cid, 2)]
    assert main(["chats", "show", cid, "--kb", "kb"]) == 0
    shown = capsys.readouterr().out
    assert f"## 1. {Q_CHUNK}" in shown and "## 2. 那固定长度呢？" in shown
    out = cli_env[0] / "conv.json"
    assert main(["chats", "export", cid, "--kb", "kb", "--out", str(out)]) == 0
    assert len(json.loads(out.read_text(encoding="utf-8"))["turns"]) == 2
    assert main(["chats", "replay", cid, "--kb", "kb", "--json", "--top-k", "1"]) == 0
    replayed = json.loads(capsys.readouterr().out)
    assert [t["n"] for t in replayed["turns"]] == [1, 2]
    assert all(0.0 <= t["retrieved_overlap"] <= 1.0 for t in replayed["turns"])
    assert main(["chats", "show", "nope", "--kb", "kb"]) == 2
    assert "no conversation 'nope'" in capsys.readouterr().err
