"""`wikirag judge`: rate the chapters runs put in their top k that no one has judged yet."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from engine.chapters import KnowledgeBase
from engine.errors import EngineError
from engine.tree import parse_kb
from workbench.commands.common import add_kb_args, info, print_json, workspace
from workbench.commands.scorecard_cmd import load_run_by_id
from workbench.eval import golden, pending
from workbench.eval import judgments as J
from workbench.eval.agreement import agreement
from workbench.eval.run_record import UNJUDGED_K, latest_run_record
from workbench.eval.snippets import snippet
from workbench.eval.unjudged import QueueEntry, rating_queue
from workbench.workspace import Workspace

PROMPT = "grade [0 not relevant, 1 related, 2 relevant, 3 perfect, l later, ? can't tell, q quit]: "


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("judge", help="rate unjudged chapters of saved runs; rater agreement")
    js = p.add_subparsers(dest="judge_command", metavar="ACTION")
    q = js.add_parser("queue", help="walk the rating queue (the default action)")
    _queue_args(q)
    s = js.add_parser("set", help="record one judgment: QUERY_ID NODE_ID GRADE")
    add_kb_args(s, json=False)
    s.add_argument("query_id")
    s.add_argument("node_id")
    s.add_argument("grade", help="0-3, later or unsure")
    _rater_arg(s)
    s.set_defaults(func=_set)
    a = js.add_parser("agreement", help="Cohen's / Fleiss' kappa per query and overall")
    add_kb_args(a)
    a.add_argument("--weights", choices=["linear", "quadratic", "none"], default="linear")
    a.set_defaults(func=_agreement)
    _queue_args(p)


def _rater_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--rater", default=None, help=f"your name (default: ${J.RATER_ENV})")


def _queue_args(p: argparse.ArgumentParser) -> None:
    add_kb_args(p, index=True)
    p.add_argument("--config", default=None, help="--pending: the config to search with")
    _rater_arg(p)
    p.add_argument(
        "--run",
        action="append",
        default=[],
        metavar="ID",
        help="pool this saved run (repeatable; default: the latest run)",
    )
    p.add_argument("--k", type=int, default=UNJUDGED_K, help="top k of each run to judge")
    p.add_argument("--list", action="store_true", help="print the queue instead of prompting")
    p.add_argument(
        "--pending",
        action="store_true",
        help="judge the baseline's top k for questions sampled from the query log",
    )
    p.set_defaults(func=_queue)


def _rater(args: argparse.Namespace) -> str:
    name = (args.rater or J.default_rater()).strip()
    if not name:
        raise J.JudgmentsError(
            f"who is rating? pass --rater NAME or set ${J.RATER_ENV} (judgments keep the rater)"
        )
    return name


def queue_for(
    ws: Workspace, gs: golden.GoldenSet, run_ids: list[str], k: int, rater: str | None
) -> list[QueueEntry]:
    """The rating queue of saved runs (the latest one when ``run_ids`` is empty)."""

    if run_ids:
        records = [load_run_by_id(ws, r) for r in run_ids]
    else:
        latest = latest_run_record(ws.runs_dir)
        if latest is None:
            raise EngineError(f"no run records in {ws.runs_dir}; run `wikirag eval` first")
        records = [latest]
    judged = J.read(J.path_for(gs.path)) if gs.path else []
    runs = [(r.name, r) for r in records]
    return rating_queue(runs, gs, k=k, judgments=judged, rater=rater)


def pending_queue(
    ws: Workspace, gs: golden.GoldenSet, k: int, rater: str | None
) -> list[QueueEntry]:
    """The queue of the questions waiting in ``<set>.pending.yaml`` (baseline's top k)."""
    from engine.search import Engine  # deferred: loads lancedb (~2 s)

    engine = Engine.open(ws.kb, ws.index, ws.load_config())

    def search(q: str) -> list[str]:
        return [r.node_id for r in engine.search(q, top_k=k).results]

    judged = J.read(J.path_for(ws.dataset))
    return pending.queue(gs, search, judgments=judged, rater=rater)


def _queue(args: argparse.Namespace) -> int:
    if args.k < 1:
        raise ValueError("--k must be at least 1")
    ws = workspace(args)
    gs = golden.load(ws.dataset)
    rater = None if args.list else _rater(args)
    if args.pending:
        entries = pending_queue(ws, gs, args.k, rater)
    else:
        entries = queue_for(ws, gs, args.run, args.k, rater)
    if args.list:
        if args.json:
            print_json([e.to_dict() for e in entries])
        else:
            for e in entries:
                sys.stdout.write(f"{e.item_id}\t{e.node_id}\trank {e.best_rank}\n")
            info(f"{len(entries)} unjudged chapters in the top {args.k}")
        return 0
    if not entries:
        info(f"nothing to judge: every chapter in the top {args.k} has a grade")
        return 0
    kb = parse_kb(ws.kb)
    done = walk(entries, kb, gs, rater or "", J.path_for(ws.dataset), _read_key)
    info(f"recorded {done} judgments in {J.path_for(ws.dataset)}")
    return 0


def walk(
    entries: list[QueueEntry],
    kb: KnowledgeBase,
    gs: golden.GoldenSet,
    rater: str,
    path: object,
    read_key: Callable[[str], str],
) -> int:
    """Prompt for each entry, saving each answer at once (quitting loses nothing)."""
    from workbench.ui.snippets import snippet_markdown

    done = 0
    for n, e in enumerate(entries, 1):
        node = kb.get(e.node_id)
        crumb = " > ".join(node.breadcrumb) if node else "(chapter no longer in the KB)"
        text = snippet_markdown(snippet(node.content, e.query)) if node else ""
        sys.stdout.write(
            f"\n[{n}/{len(entries)}] {e.item_id}: {e.query}\n  {crumb}\n  {e.node_id}\n  {text}\n"
        )
        while True:
            key = read_key(PROMPT).strip().lower()
            if key == "q":
                return done
            try:
                j = J.judgment(e.item_id, e.node_id, key, rater)
            except J.JudgmentsError as exc:
                sys.stdout.write(f"{exc}\n")
                continue
            J.append(path, [j])  # type: ignore[arg-type]
            done += 1
            break
    return done


def _read_key(prompt: str) -> str:
    """One key press on a terminal (no Enter needed), else one line (pipes, tests)."""
    sys.stdout.write(prompt)
    sys.stdout.flush()
    if not sys.stdin.isatty():
        line = sys.stdin.readline()
        return line if line else "q"  # end of input: stop, keeping what was rated
    import termios
    import tty

    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        ch = sys.stdin.read(1)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)
    sys.stdout.write(ch + "\n")
    return "q" if ch in ("\x03", "\x04") else ch


def _set(args: argparse.Namespace) -> int:
    ws = workspace(args)
    gs = golden.load(ws.dataset)

    waiting = {i.id for i in pending.load(ws.dataset)}
    if gs.get(args.query_id) is None and args.query_id not in waiting:
        raise J.JudgmentsError(
            f"no query {args.query_id!r} in {ws.dataset}; `wikirag golden validate` lists them"
        )
    kb = parse_kb(ws.kb)
    if kb.get(args.node_id) is None:
        raise J.JudgmentsError(
            f"no chapter {args.node_id!r} in {ws.kb}; `wikirag tree` lists chapter ids"
        )
    j = J.judgment(args.query_id, args.node_id, args.grade, _rater(args))
    J.append(J.path_for(ws.dataset), [j])
    info(f"{j.rater}: {j.query_id} {j.node_id} = {j.grade}")
    return 0


def _agreement(args: argparse.Namespace) -> int:
    ws = workspace(args)
    js = J.read(J.path_for(ws.dataset))
    res = agreement(js, weights=None if args.weights == "none" else args.weights)
    if args.json:
        print_json(res.to_dict())
        return 0
    if res.kappa is None and res.pairs == 0:
        sys.stdout.write("fewer than two raters graded the same chapters; nothing to compare\n")
        return 0

    def fmt(k: float | None) -> str:
        return "n/a" if k is None else f"{k:.3f}"

    sys.stdout.write(
        f"{res.method} kappa {fmt(res.kappa)} over {res.pairs} pairs, raters "
        f"{', '.join(res.raters)}\n"
    )
    for qid, k in res.per_query.items():
        sys.stdout.write(f"  {qid}: {fmt(k)}\n")
    if res.disagreements:
        sys.stdout.write("disagreements (largest spread first):\n")
    for d in res.disagreements:
        grades = ", ".join(f"{r} {g}" for r, g in d.grades.items())
        sys.stdout.write(f"  {d.query_id}  {d.node_id}  {grades}\n")
    return 0
