"""Chat conversations that last: every turn with its trace kept per KB, listed, reopened,
exported, and replayed under another config so an answer-level change can be judged like a
retrieval one.

Stored in SQLite (`experiments/<kb>/chats.sqlite`, stdlib, readers never blocked in WAL
mode). Every write is one ``BEGIN IMMEDIATE`` transaction: the turn number is read and the
turn inserted under the write lock, so concurrent ``ask --save`` to one conversation cannot
pick the same number; a writer that finds the lock held waits (SQLite's busy timeout, then
retries with backoff) instead of failing. What is stored passes through
``ChatAnswer.to_dict``, which redacts anything key-like: keys are never stored.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from workbench.answer.chat_answer import ChatAnswer

FILE = "chats.sqlite"
TITLE_CHARS = 80
# SQLite's own wait for a lock per attempt, and how long in all a writer keeps trying: a
# long answer being saved holds the lock for milliseconds, so a minute is a stuck process.
_BUSY_TIMEOUT_S = 5.0
_BUSY_WAIT_S = 60.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY,
    title TEXT NOT NULL,
    created TEXT NOT NULL,
    updated TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS turns (
    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    n INTEGER NOT NULL,
    created TEXT NOT NULL,
    config_label TEXT NOT NULL,
    config_hash TEXT NOT NULL,
    answer_json TEXT NOT NULL,
    PRIMARY KEY (conversation_id, n)
);
"""


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Turn:
    n: int
    created: str
    config_label: str
    config_hash: str
    answer: dict[str, Any]  # ChatAnswer.to_dict(): question, answer, citations, trace, ...

    @property
    def question(self) -> str:
        return str(self.answer.get("question", ""))


@dataclass(frozen=True)
class Conversation:
    id: str
    title: str
    created: str
    updated: str
    turns: tuple[Turn, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "title": self.title,
            "created": self.created,
            "updated": self.updated,
            "turns": [
                {
                    "n": t.n,
                    "created": t.created,
                    "config": t.config_label,
                    "config_hash": t.config_hash,
                    **t.answer,
                }
                for t in self.turns
            ],
        }

    def to_markdown(self) -> str:
        lines = [f"# {self.title}", "", f"conversation `{self.id}` · started {self.created}", ""]
        for t in self.turns:
            a = t.answer
            lines += [
                f"## {t.n}. {t.question}",
                "",
                f"_config {t.config_label} `{t.config_hash}` · {a.get('mode', '')}"
                + (" · refused" if a.get("refusal") else "")
                + "_",
                "",
                str(a.get("answer", "")),
                "",
            ]
            cites = a.get("citations") or []
            if cites:
                lines.append("Sources:")
                lines += [
                    f"- [{c.get('n')}] {' › '.join(c.get('breadcrumb') or [])} (`{c.get('node_id')}`)"
                    for c in cites
                ]
                lines.append("")
        return "\n".join(lines)


class ChatStore:
    """The conversations of one KB (``experiments/<kb>/chats.sqlite``)."""

    def __init__(self, folder: str | Path) -> None:
        self.path = Path(folder) / FILE

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: no implicit transactions; each one is begun explicitly below
        con = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, isolation_level=None)
        try:
            con.execute("PRAGMA journal_mode=WAL")
            con.execute("PRAGMA foreign_keys=ON")
            con.executescript(_SCHEMA)
        except BaseException:
            con.close()
            raise
        return con

    def _begin(self, write: bool) -> sqlite3.Connection:
        """A connection inside a transaction: IMMEDIATE (the write lock taken now) for writes."""
        deadline = time.monotonic() + _BUSY_WAIT_S
        delay = 0.05
        while True:
            con = None
            try:
                con = self._open()
                con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                return con
            except sqlite3.DatabaseError as exc:
                if con is not None:
                    con.close()
                if not _busy(exc) or time.monotonic() + delay > deadline:
                    raise self._error(exc) from exc
            time.sleep(delay * random.uniform(0.5, 1.5))  # jittered: writers do not march
            delay = min(delay * 2, 1.0)

    def _error(self, exc: sqlite3.DatabaseError) -> EngineError:
        if _busy(exc):
            return EngineError(
                f"chat history {self.path} stayed locked by another process for "
                f"{_BUSY_WAIT_S:.0f} s; nothing was saved, try again"
            )
        return EngineError(f"chat history {self.path} could not be used ({exc}); it was left as is")

    @contextmanager
    def _db(self, write: bool = False) -> Iterator[sqlite3.Connection]:
        con = self._begin(write)
        try:
            yield con
            con.execute("COMMIT")
        except BaseException as exc:
            with suppress(sqlite3.Error):
                con.execute("ROLLBACK")
            if isinstance(exc, sqlite3.DatabaseError):
                raise self._error(exc) from exc
            raise
        finally:
            con.close()

    def start(self, first_question: str) -> str:
        """A new conversation titled by its first question; returns its id."""
        cid = uuid.uuid4().hex[:12]
        title = " ".join(first_question.split())[:TITLE_CHARS] or "(untitled)"
        now = _now()
        with self._db(write=True) as con:
            con.execute(
                "INSERT INTO conversations (id, title, created, updated) VALUES (?, ?, ?, ?)",
                (cid, title, now, now),
            )
        return cid

    def add_turn(
        self, conversation_id: str, answer: Any, config_label: str, config_hash: str
    ) -> int:
        """Append one answer (a ChatAnswer or its dict) and return its turn number."""
        data = answer.to_dict() if hasattr(answer, "to_dict") else dict(answer)
        now = _now()
        with self._db(write=True) as con:
            if (
                con.execute(
                    "SELECT 1 FROM conversations WHERE id = ?", (conversation_id,)
                ).fetchone()
                is None
            ):
                raise EngineError(f"no conversation {conversation_id!r}")
            (n,) = con.execute(
                "SELECT COALESCE(MAX(n), 0) + 1 FROM turns WHERE conversation_id = ?",
                (conversation_id,),
            ).fetchone()
            con.execute(
                "INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?)",
                (
                    conversation_id,
                    n,
                    now,
                    config_label,
                    config_hash,
                    json.dumps(data, ensure_ascii=False, default=str),
                ),
            )
            con.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        return int(n)

    def list(self) -> list[Conversation]:
        """Every conversation, most recently active first (turns not loaded)."""
        if not self.path.is_file():
            return []
        with self._db() as con:
            rows = con.execute(
                "SELECT id, title, created, updated FROM conversations ORDER BY updated DESC, id"
            ).fetchall()
        return [Conversation(*r) for r in rows]

    def turn_counts(self) -> dict[str, int]:
        if not self.path.is_file():
            return {}
        with self._db() as con:
            rows = con.execute(
                "SELECT conversation_id, COUNT(*) FROM turns GROUP BY conversation_id"
            ).fetchall()
        return {cid: int(n) for cid, n in rows}

    def load(self, conversation_id: str) -> Conversation:
        with self._db() as con:
            head = con.execute(
                "SELECT id, title, created, updated FROM conversations WHERE id = ?",
                (conversation_id,),
            ).fetchone()
            if head is None:
                known = ", ".join(c.id for c in self.list()[:5]) or "none"
                raise EngineError(f"no conversation {conversation_id!r}; recent: {known}")
            rows = con.execute(
                "SELECT n, created, config_label, config_hash, answer_json FROM turns "
                "WHERE conversation_id = ? ORDER BY n",
                (conversation_id,),
            ).fetchall()
        turns = tuple(
            Turn(n, c, lab, h, _stored_answer(a, f"turn {n} of conversation {conversation_id}"))
            for n, c, lab, h, a in rows
        )
        cid, title, created, updated = head
        return Conversation(cid, title, created, updated, turns=turns)

    def delete(self, conversation_id: str) -> None:
        with self._db(write=True) as con:
            con.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))


def _busy(exc: sqlite3.DatabaseError) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(
        w in str(exc).lower() for w in ("locked", "busy")
    )


def _stored_answer(raw: Any, where: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as exc:
        raise EngineError(f"chat history: {where} is not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise EngineError(f"chat history: {where} is a JSON {type(data).__name__}, not an object")
    answer_from_dict(data, where)  # the shape checked once, here, for every reader
    return data


# What a stored answer must hold to be shown or used as history (newer keys are ignored).
_REQUIRED: dict[str, type | tuple[type, ...]] = {
    "question": str,
    "answer": str,
    "citations": list,
    "refusal": bool,
    "mode": str,
    "retrieved": list,
    "trace": list,
    "rounds": int,
}
_OPTIONAL: dict[str, type | tuple[type, ...]] = {
    "notice": (str, type(None)),
    "query": str,
    "took_ms": (int, float),
}


def answer_from_dict(data: Any, where: str = "a stored turn") -> ChatAnswer:
    """A stored turn back as a ChatAnswer; a one-line EngineError when it has the wrong
    shape (a hand-edited or foreign record), never a traceback."""
    if not isinstance(data, dict):
        raise EngineError(f"chat history: {where} is a {type(data).__name__}, not an object")
    for key, kind in (_REQUIRED | _OPTIONAL).items():
        if key not in data:
            if key in _REQUIRED:
                raise EngineError(f"chat history: {where} has no {key!r}")
            continue
        value = data[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise EngineError(f"chat history: {where} has {key!r} of type {type(value).__name__}")
        if isinstance(value, list) and not all(isinstance(x, dict) for x in value):
            raise EngineError(f"chat history: {where} has {key!r} items that are not objects")
    names = {f.name for f in fields(ChatAnswer)}
    return ChatAnswer(**{k: v for k, v in data.items() if k in names})


AskFn = Callable[[str, list[Any]], Any]  # (question, history of ChatAnswers) -> ChatAnswer


def replay(conversation: Conversation, ask: AskFn) -> list[Any]:
    """Ask every question of ``conversation`` again, in order, each with the replayed
    answers so far as its history (so follow-ups resolve against the new answers)."""
    history: list[Any] = []
    for t in conversation.turns:
        history.append(ask(t.question, list(history)))
    return history


@dataclass(frozen=True)
class ReplayRow:
    n: int
    question: str
    answer_a: str
    answer_b: str
    cited_a: tuple[str, ...]
    cited_b: tuple[str, ...]
    retrieved_a: tuple[str, ...]
    retrieved_b: tuple[str, ...]
    refused_a: bool
    refused_b: bool

    @property
    def retrieved_overlap(self) -> float:
        """Jaccard overlap of the retrieved chapters (1.0 = the same chapters)."""
        a, b = set(self.retrieved_a), set(self.retrieved_b)
        return len(a & b) / len(a | b) if a | b else 1.0

    @property
    def same_answer(self) -> bool:
        return self.answer_a.strip() == self.answer_b.strip()


def compare_replay(conversation: Conversation, replayed: Sequence[Any]) -> list[ReplayRow]:
    """The stored answers beside the replayed ones, turn by turn."""
    rows = []
    for t, new in zip(conversation.turns, replayed, strict=True):
        b = new.to_dict() if hasattr(new, "to_dict") else dict(new)
        a = t.answer
        rows.append(
            ReplayRow(
                t.n,
                t.question,
                str(a.get("answer", "")),
                str(b.get("answer", "")),
                tuple(c.get("node_id", "") for c in a.get("citations") or []),
                tuple(c.get("node_id", "") for c in b.get("citations") or []),
                tuple(r.get("node_id", "") for r in a.get("retrieved") or []),
                tuple(r.get("node_id", "") for r in b.get("retrieved") or []),
                bool(a.get("refusal")),
                bool(b.get("refusal")),
            )
        )
    return rows
