"""Chat history under many writers: every turn kept, numbers never shared, errors that say
what happened and never invite deleting the history. Real processes, real SQLite locks."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import EngineError
from tests.workbench.test_conversations import _answer
from workbench.answer import conversations
from workbench.answer.conversations import ChatStore

REPO = Path(__file__).resolve().parents[2]

# Holds the chat database's write lock for 0.5 s at a time (with 50 ms gaps) until told to stop.
LOCK_HOLDER = """
import sqlite3, sys, time, pathlib
path, stop, ready = sys.argv[1], pathlib.Path(sys.argv[2]), pathlib.Path(sys.argv[3])
con = sqlite3.connect(path, isolation_level=None, timeout=30)
held = 0
while not stop.exists():
    con.execute("BEGIN IMMEDIATE")
    ready.touch()
    time.sleep(0.5)
    con.execute("COMMIT")
    held += 1
    time.sleep(0.05)
print(held)
"""

# One writer: the real write function, as `ask --save` calls it.
WRITER = """
import sys
from tests.workbench.test_conversations import _answer
from workbench.answer.conversations import ChatStore
folder, cid, i = sys.argv[1], sys.argv[2], int(sys.argv[3])
n = ChatStore(folder).add_turn(cid, _answer(f"q{i}", f"a{i} [1]"), "w", "h")
print(n)
"""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "WIKIRAG_LLM"))}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    return env


class LockHolder:
    """A process holding the write lock half a second at a time, while the block runs."""

    def __init__(self, db: Path, tmp: Path) -> None:
        self.db, self.stop, self.ready = db, tmp / "stop", tmp / "ready"

    def __enter__(self) -> LockHolder:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", LOCK_HOLDER, str(self.db), str(self.stop), str(self.ready)],
            stdout=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 30
        while not self.ready.exists():
            assert time.monotonic() < deadline and self.proc.poll() is None, "lock holder died"
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.touch()
        out, _ = self.proc.communicate(timeout=30)
        self.held = int(out.strip() or 0)


def test_ten_concurrent_writers_keep_every_turn_while_another_process_holds_the_lock(tmp_path):
    store = ChatStore(tmp_path)
    cid = store.start("q0")
    store.add_turn(cid, _answer("q0", "a0 [1]"), "w", "h")
    with LockHolder(store.path, tmp_path) as holder:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(tmp_path), cid, str(i)],
                cwd=REPO,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(1, 11)
        ]
        results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    assert [rc for rc, _, _ in results] == [0] * 10, [err for _, _, err in results]
    assert holder.held >= 1  # the writers really met a held lock
    assert sorted(int(out) for _, out, _ in results) == list(range(2, 12))
    turns = store.load(cid).turns
    assert [t.n for t in turns] == list(range(1, 12))
    assert sorted(t.question for t in turns) == sorted(f"q{i}" for i in range(11))


@pytest.mark.slow
def test_ten_concurrent_ask_save_runs_of_the_cli_keep_every_turn(tmp_path):
    from engine.config import EngineConfig
    from engine.indexer import build_index
    from engine.tree import parse_kb

    (tmp_path / "kb" / "rag").mkdir(parents=True)
    rel = "rag/parent-child-chunks.md"
    (tmp_path / "kb" / rel).write_bytes((REPO / "wiki" / rel).read_bytes())
    cfg = EngineConfig().with_overrides({"embedding.provider": "hash", "expansion.enabled": False})
    (tmp_path / "experiments" / "kb").mkdir(parents=True)
    cfg.save(tmp_path / "experiments" / "kb" / "baseline.yaml")
    build_index(parse_kb(tmp_path / "kb"), cfg, str(tmp_path / ".wikirag" / "kb"))
    store = ChatStore(tmp_path / "experiments" / "kb")
    cid = store.start("父子块检索的数据结构是什么？")
    ask = [sys.executable, "-m", "workbench.cli", "ask", "--kb", "kb", "--save", cid]
    with LockHolder(store.path, tmp_path) as holder:
        procs = [
            subprocess.Popen(
                [*ask, f"父子块检索的数据结构是什么？ ({i})"],
                cwd=tmp_path,
                env=_env(),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(10)
        ]
        results = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert [rc for rc, _, _ in results] == [0] * 10, [err[-500:] for _, _, err in results]
    assert holder.held >= 1
    turns = store.load(cid).turns
    assert [t.n for t in turns] == list(range(1, 11))
    assert all("kept as turn" in err for _, _, err in results)


def test_a_lock_held_too_long_is_a_one_line_error_that_does_not_suggest_deleting(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(conversations, "_BUSY_TIMEOUT_S", 0.1)
    monkeypatch.setattr(conversations, "_BUSY_WAIT_S", 0.3)
    store = ChatStore(tmp_path)
    cid = store.start("q")
    with LockHolder(store.path, tmp_path), pytest.raises(EngineError) as err:
        store.add_turn(cid, _answer("q", "a"), "w", "h")
    msg = str(err.value)
    assert "stayed locked by another process" in msg and "nothing was saved" in msg
    assert "\n" not in msg and "delet" not in msg.lower() and "remove" not in msg.lower()
    assert store.turn_counts() == {}  # nothing half-written


def test_an_unreadable_history_is_left_as_is_and_never_called_deletable(tmp_path):
    db = tmp_path / "chats.sqlite"
    db.write_bytes(b"not a database, but someone's data" * 100)
    before = db.read_bytes()
    with pytest.raises(EngineError) as err:
        ChatStore(tmp_path).list()
    msg = str(err.value)
    assert "left as is" in msg and "delet" not in msg.lower() and "\n" not in msg
    assert db.read_bytes() == before


@pytest.mark.parametrize(
    "stored, problem",
    [
        ("[1, 2]", "is a JSON list, not an object"),
        ("{not json", "is not valid JSON"),
        ('{"question": 1}', "has 'question' of type int"),
        ('{"question": "q"}', "has no 'answer'"),
    ],
)
def test_a_stored_turn_of_the_wrong_shape_is_a_one_line_error(tmp_path, stored, problem):
    store = ChatStore(tmp_path)
    cid = store.start("q")
    store.add_turn(cid, _answer("q", "a"), "w", "h")
    con = sqlite3.connect(store.path)
    with con:
        con.execute("UPDATE turns SET answer_json = ? WHERE n = 1", (stored,))
    con.close()
    with pytest.raises(EngineError) as err:
        store.load(cid)
    assert str(err.value).startswith(f"chat history: turn 1 of conversation {cid} {problem}")
    assert "\n" not in str(err.value)


def test_a_wrong_shaped_turn_is_one_line_from_the_cli_too(tmp_path, monkeypatch, capsys):
    from workbench.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "kb").mkdir()
    store = ChatStore(tmp_path / "experiments" / "kb")
    cid = store.start("q")
    store.add_turn(cid, _answer("q", "a"), "w", "h")
    con = sqlite3.connect(store.path)
    with con:
        con.execute("UPDATE turns SET answer_json = ? WHERE n = 1", (json.dumps({"q": 1}),))
    con.close()
    assert main(["chats", "show", cid, "--kb", "kb"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "has no 'question'" in err and "Traceback" not in err
