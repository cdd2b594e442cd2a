"""Chat conversations kept on disk: stored, listed, reopened, exported, replayed."""

from __future__ import annotations

import json

import pytest

from engine.errors import EngineError
from workbench.answer.chat_answer import ChatAnswer
from workbench.answer.conversations import (
    ChatStore,
    answer_from_dict,
    compare_replay,
    replay,
)
from workbench.answer.llm import LLMSettings


def _answer(q, text, cited=("a#x",), retrieved=("a#x", "b#y"), refusal=False):
    return ChatAnswer(
        question=q,
        answer=text,
        citations=[{"n": i + 1, "node_id": n, "breadcrumb": ["A", n]} for i, n in enumerate(cited)],
        refusal=refusal,
        mode="extractive",
        notice=None,
        retrieved=[{"n": i + 1, "node_id": n, "score": 1.0} for i, n in enumerate(retrieved)],
        trace=[{"step": "retrieve", "ms": 1.0, "detail": {"query": q}}],
        rounds=1,
        query=q,
    )


def test_conversations_are_kept_listed_and_reopened(tmp_path):
    store = ChatStore(tmp_path)
    assert store.list() == []
    cid = store.start("父子块检索怎么展开？")
    assert store.add_turn(cid, _answer("父子块检索怎么展开？", "见 [1]"), "baseline", "abc") == 1
    assert store.add_turn(cid, _answer("那兄弟节点呢？", "见 [1]"), "baseline", "abc") == 2
    other = store.start("second")
    listed = store.list()
    assert {c.id for c in listed} == {cid, other}
    assert store.turn_counts() == {cid: 2}
    conv = ChatStore(tmp_path).load(cid)  # a fresh store: read back from disk
    assert conv.title == "父子块检索怎么展开？"
    assert [t.question for t in conv.turns] == ["父子块检索怎么展开？", "那兄弟节点呢？"]
    assert conv.turns[0].answer["trace"][0]["step"] == "retrieve"
    restored = answer_from_dict(conv.turns[0].answer)
    assert isinstance(restored, ChatAnswer) and restored.citations[0]["node_id"] == "a#x"
    store.delete(other)
    assert [c.id for c in store.list()] == [cid]


def test_exports_carry_every_turn(tmp_path):
    store = ChatStore(tmp_path)
    cid = store.start("q1")
    store.add_turn(cid, _answer("q1", "answer one [1]"), "v2", "h2")
    conv = store.load(cid)
    data = json.loads(json.dumps(conv.to_dict()))
    assert data["turns"][0]["answer"] == "answer one [1]" and data["turns"][0]["config"] == "v2"
    md = conv.to_markdown()
    assert "## 1. q1" in md and "`a#x`" in md


def test_api_keys_are_never_stored(tmp_path):
    key = "sk-test-0123456789abcdefSECRET"
    LLMSettings(base_url="http://127.0.0.1:1", model="m", api_key=key)  # registers the key
    store = ChatStore(tmp_path)
    cid = store.start("q")
    store.add_turn(cid, _answer("q", f"the key is {key}"), "baseline", "h")
    raw = (tmp_path / "chats.sqlite").read_bytes()
    assert key.encode() not in raw
    assert "***" in store.load(cid).turns[0].answer["answer"]


def test_unknown_conversation_is_a_clear_error(tmp_path):
    store = ChatStore(tmp_path)
    with pytest.raises(EngineError, match="no conversation 'nope'"):
        store.load("nope")
    with pytest.raises(EngineError, match="no conversation"):
        store.add_turn("nope", _answer("q", "a"), "b", "h")


def test_replay_asks_again_in_order_with_the_new_history_and_compares(tmp_path):
    store = ChatStore(tmp_path)
    cid = store.start("q1")
    store.add_turn(cid, _answer("q1", "old one", retrieved=("a#x", "b#y")), "baseline", "h1")
    store.add_turn(cid, _answer("q2", "old two"), "baseline", "h1")
    seen_history = []

    def ask(question, history):
        seen_history.append([h.answer for h in history])
        return _answer(question, f"new {question}", retrieved=("a#x", "c#z"))

    new = replay(store.load(cid), ask)
    assert [a.answer for a in new] == ["new q1", "new q2"]
    assert seen_history == [[], ["new q1"]]  # follow-ups see the replayed answers
    rows = compare_replay(store.load(cid), new)
    assert rows[0].answer_a == "old one" and rows[0].answer_b == "new q1"
    assert rows[0].retrieved_overlap == pytest.approx(1 / 3)
    assert not rows[0].same_answer
