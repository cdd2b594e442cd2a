"""`wikirag ask` (an answer with citations) and `wikirag summarize` (LLM chapter summaries)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from engine.tree import parse_kb
from workbench.answer.conversations import ChatStore, answer_from_dict
from workbench.answer.llm import LLMClient
from workbench.answer.summaries import summarize_kb
from workbench.commands import common
from workbench.eval.query_log import query_log_for

SUMMARY_FILE = "summaries.json"


def register(sub: argparse._SubParsersAction) -> None:
    ask = sub.add_parser("ask", help="answer a question from the KB with numbered citations")
    ask.add_argument("question", help="the question, in quotes")
    common.add_workspace_args(ask)
    common.add_answer_args(ask)
    common.add_json_arg(ask, "machine-readable answer on stdout")
    common.add_log_args(ask)
    ask.add_argument(
        "--save",
        nargs="?",
        const="new",
        default=None,
        metavar="CONVERSATION",
        help="keep the turn with the KB's chats (a new conversation, or continue one by id)",
    )
    ask.set_defaults(func=_ask)

    summ = sub.add_parser(
        "summarize", help="write 1-2 sentence LLM summaries per chapter to <index>/summaries.json"
    )
    common.add_workspace_args(summ)
    summ.set_defaults(func=_summarize)


def _ask(args: argparse.Namespace) -> int:
    from engine.search import Engine  # deferred: loads lancedb (~2 s)
    from workbench.answer.chat import answer

    if args.top_k < 1:
        raise ValueError("--top-k must be at least 1")
    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    engine = Engine.open(ws.kb, ws.index, cfg)
    llm = LLMClient.from_config(cfg.llm)
    history: list[Any] = []
    store = cid = None
    if args.save:
        store = ChatStore(ws.experiments)
        if args.save != "new":
            history = [
                answer_from_dict(t.answer, f"turn {t.n} of conversation {args.save}")
                for t in store.load(args.save).turns
            ]
            cid = args.save
    log = query_log_for(ws.index, args.log_queries or None, args.log_retention_days)
    if log is not None:
        log.record(args.question, "chat")
    ans = answer(args.question, engine, history=history, llm=llm, mode=args.mode, top_k=args.top_k)
    if store is not None:
        cid = cid or store.start(args.question)
        n = store.add_turn(cid, ans, "cli", cfg.hash)
        common.info(f"kept as turn {n} of conversation {cid} (`wikirag chats show {cid}`)")
    if args.json:
        d = ans.to_dict()
        common.print_json({k: d[k] for k in _JSON_KEYS})
        return 0
    sys.stdout.write(render_answer(ans.to_dict()))
    return 0


_JSON_KEYS = (
    "question",
    "answer",
    "citations",
    "refusal",
    "mode",
    "notice",
    "retrieved",
    "trace",
    "rounds",
    "took_ms",
)


def render_answer(d: dict[str, Any]) -> str:
    """The answer, its numbered sources, and the notice, as plain text."""
    lines = [d["answer"].rstrip(), ""]
    if d["citations"]:
        lines.append("Sources:")
        for c in d["citations"]:
            where = f"{c['file_path']}:{c['line']}" if c.get("file_path") else c["node_id"]
            lines.append(f"  [{c['n']}] {' › '.join(c['breadcrumb'])}  ({where})")
    elif d["retrieved"]:
        lines.append("Closest chapters:")
        for r in d["retrieved"][:3]:
            lines.append(f"  - {' › '.join(r['breadcrumb'])}  ({r['node_id']})")
    if d.get("notice"):
        lines += ["", f"Note: {d['notice']}"]
    return "\n".join(lines) + "\n"


def _summarize(args: argparse.Namespace) -> int:
    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    llm = LLMClient.from_config(cfg.llm)
    kb = parse_kb(ws.kb)
    path = ws.index / SUMMARY_FILE

    def progress(done: int, total: int) -> None:
        if done == total or done % 10 == 0:
            common.info(f"summarised {done}/{total}")

    n_new, n_cached = summarize_kb(kb, llm, path, progress=progress)
    common.info(f"{n_new} new summaries, {n_cached} cached; written to {path}")
    return 0
