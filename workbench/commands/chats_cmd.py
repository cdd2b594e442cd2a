"""`wikirag chats list | show | export | replay | delete`: the Chat page's kept conversations."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from engine.atomic import atomic_write_text
from workbench.answer.conversations import ChatStore, compare_replay, replay
from workbench.answer.llm import LLMClient
from workbench.commands import common

if TYPE_CHECKING:
    from workbench.answer.conversations import ChatStore


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("chats", help="kept chat conversations: list, show, export, replay")
    csub = p.add_subparsers(dest="chats_command", metavar="SUBCOMMAND", required=True)
    ls = csub.add_parser("list", help="conversations, most recent first")
    common.add_kb_arg(ls)
    common.add_json_arg(ls)
    ls.set_defaults(func=_list)
    for name, helptext in (("show", "one conversation as Markdown"), ("delete", "remove one")):
        s = csub.add_parser(name, help=helptext)
        s.add_argument("id", help="conversation id (see `wikirag chats list`)")
        common.add_kb_arg(s)
        common.add_json_arg(s)
        s.set_defaults(func=_show if name == "show" else _delete)
    ex = csub.add_parser("export", help="write one conversation to a file (.md or .json)")
    ex.add_argument("id")
    common.add_kb_arg(ex)
    ex.add_argument("--out", required=True, help="OUT.md or OUT.json")
    ex.set_defaults(func=_export)
    rp = csub.add_parser(
        "replay", help="ask a conversation's questions again under another config, side by side"
    )
    rp.add_argument("id")
    common.add_workspace_args(rp)
    common.add_answer_args(rp)
    common.add_json_arg(rp)
    rp.set_defaults(func=_replay)


def _store(args: argparse.Namespace) -> ChatStore:
    return ChatStore(common.workspace(args).experiments)


def _list(args: argparse.Namespace) -> int:
    store = _store(args)
    convs, counts = store.list(), store.turn_counts()
    if args.json:
        common.print_json([{**c.to_dict(), "turns": counts.get(c.id, 0)} for c in convs])
        return 0
    if not convs:
        common.info("no conversations yet: ask on the Chat page (`wikirag ui`)")
        return 0
    for c in convs:
        sys.stdout.write(f"{c.id}  {c.updated}  {counts.get(c.id, 0):>3} turns  {c.title}\n")
    return 0


def _show(args: argparse.Namespace) -> int:
    conv = _store(args).load(args.id)
    if args.json:
        common.print_json(conv.to_dict())
    else:
        sys.stdout.write(conv.to_markdown() + "\n")
    return 0


def _delete(args: argparse.Namespace) -> int:
    store = _store(args)
    store.load(args.id)  # a clear error when it does not exist
    store.delete(args.id)
    common.info(f"deleted conversation {args.id}")
    return 0


def _export(args: argparse.Namespace) -> int:
    import json

    conv = _store(args).load(args.id)
    if args.out.endswith(".json"):
        text = json.dumps(conv.to_dict(), ensure_ascii=False, indent=2)
    elif args.out.endswith(".md"):
        text = conv.to_markdown() + "\n"
    else:
        raise ValueError(f"--out must end in .md or .json; got {args.out!r}")
    atomic_write_text(args.out, text)
    common.info(f"wrote {args.out}")
    return 0


def _replay(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from engine.search import Engine  # deferred: loads lancedb (~2 s)
    from workbench.answer.chat import answer

    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    conv = _store(args).load(args.id)
    engine = Engine.open(ws.kb, ws.index, cfg)
    llm = LLMClient.from_config(cfg.llm)

    def ask(question: str, history: list[Any]) -> object:
        return answer(question, engine, history=history, llm=llm, mode=args.mode, top_k=args.top_k)

    rows = compare_replay(conv, replay(conv, ask))
    if args.json:
        common.print_json(
            {
                "conversation": conv.id,
                "config_hash": cfg.hash,
                "turns": [
                    {
                        **asdict(r),
                        "retrieved_overlap": r.retrieved_overlap,
                        "same_answer": r.same_answer,
                    }
                    for r in rows
                ],
            }
        )
        return 0
    for r in rows:
        sys.stdout.write(
            f"## {r.n}. {r.question}\n"
            f"-- stored ({'refused' if r.refused_a else 'cited ' + ', '.join(r.cited_a)}):\n"
            f"{r.answer_a}\n-- under config {cfg.hash} "
            f"({'refused' if r.refused_b else 'cited ' + ', '.join(r.cited_b)}):\n{r.answer_b}\n"
            f"retrieved overlap {r.retrieved_overlap:.2f}\n\n"
        )
    return 0
