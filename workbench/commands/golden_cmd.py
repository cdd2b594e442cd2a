"""`wikirag golden validate|drift|remap`: the Golden set page's checks, headless."""

from __future__ import annotations

import argparse
import sys

from engine.chapters import KnowledgeBase
from engine.config import EngineConfig
from engine.errors import EngineError
from engine.tree import parse_kb
from workbench.answer.drafting import draft_queries
from workbench.answer.llm import LLMClient, llm_settings
from workbench.commands.common import add_kb_args, info, print_json, workspace
from workbench.eval import golden, golden_drift, pending, query_log
from workbench.eval.health import format_health


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("golden", help="validate a golden set; find and remap stale labels")
    gs = p.add_subparsers(dest="golden_command", metavar="ACTION")
    v = gs.add_parser("validate", help="errors and coverage warnings (exit 1 on errors)")
    add_kb_args(v)
    v.set_defaults(func=_validate)
    d = gs.add_parser("drift", help="labels whose chapters no longer exist, with likely new ids")
    add_kb_args(d)
    d.set_defaults(func=_drift)
    r = gs.add_parser("remap", help="replace stale ids: OLD=NEW pairs, or --apply-suggestions")
    add_kb_args(r)
    r.add_argument("pairs", nargs="*", metavar="OLD=NEW")
    r.add_argument(
        "--apply-suggestions", action="store_true", help="use the top suggestion for every stale id"
    )
    r.set_defaults(func=_remap)
    dr = gs.add_parser(
        "draft", help="draft queries for chapters (LLM when configured, else from headings)"
    )
    add_kb_args(dr)
    dr.add_argument("node_ids", nargs="+", metavar="NODE_ID")
    dr.add_argument("--apply", action="store_true", help="append the drafts to the golden set")
    dr.set_defaults(func=_draft)
    h = gs.add_parser(
        "health", help="size, judged depth, unjudged share, saturation, minimum detectable effect"
    )
    add_kb_args(h)
    h.set_defaults(func=_health)
    sm = gs.add_parser(
        "sample", help="queue questions from the query log for judging; --promote judged ones"
    )
    add_kb_args(sm, index=True)
    sm.add_argument("--from-log", action="store_true", help="sample the KB's query log")
    sm.add_argument("--n", type=int, default=20, help="questions to sample (default 20)")
    sm.add_argument("--strategy", choices=query_log.STRATEGIES, default="random")
    sm.add_argument("--seed", type=int, default=0)
    sm.add_argument(
        "--promote", action="store_true", help="move pending questions with a relevant chapter"
    )
    sm.set_defaults(func=_sample)
    p.set_defaults(func=lambda a: p.print_help())


def _load(args: argparse.Namespace) -> tuple[golden.GoldenSet, KnowledgeBase]:
    ws = workspace(args)
    return golden.load(ws.dataset), parse_kb(ws.kb)


def _validate(args: argparse.Namespace) -> int:
    gs, kb = _load(args)
    issues = golden.validate(gs, kb)
    errors = [i for i in issues if i.level == "error"]
    if args.json:
        print_json(
            {
                "dataset": str(gs.path),
                "queries": len(gs.items),
                "answerable": len(gs.answerable()),
                "issues": [
                    {
                        "level": i.level,
                        "item": i.item_id,
                        "message": i.message,
                        "suggestions": list(i.suggestions),
                    }
                    for i in issues
                ],
            }
        )
    else:
        for i in issues:
            sys.stdout.write(f"{i}\n")
        sys.stdout.write(
            f"{gs.path}: {len(gs.items)} queries ({len(gs.answerable())} answerable), "
            f"{len(errors)} errors, {len(issues) - len(errors)} warnings\n"
        )
    return 1 if errors else 0


def _drift(args: argparse.Namespace) -> int:
    gs, kb = _load(args)
    drift = golden_drift.drift_report(gs, kb)
    if args.json:
        print_json(
            [
                {"item": d.item_id, "stale_id": d.stale_id, "suggestions": list(d.suggestions)}
                for d in drift
            ]
        )
        return 0
    if not drift:
        sys.stdout.write("no drift: every relevant id exists in the KB\n")
    for d in drift:
        sys.stdout.write(f"{d.item_id}: {d.stale_id}\n")
        for n, s in enumerate(d.suggestions, 1):
            sys.stdout.write(f"    {n}. {s}\n")
    return 0


def _remap(args: argparse.Namespace) -> int:
    gs, kb = _load(args)
    mapping: dict[str, str] = {}
    if args.apply_suggestions:
        for d in golden_drift.drift_report(gs, kb):
            if d.suggestions:
                mapping[d.stale_id] = d.suggestions[0]
    for pair in args.pairs:
        old, sep, new = pair.partition("=")
        if not sep or not old or not new:
            raise EngineError(f"expected OLD=NEW, got {pair!r}")
        if new not in kb:
            raise EngineError(f"{new!r} is not a node id of {args.kb}; see `wikirag tree`")
        mapping[old] = new
    if not mapping:
        info("nothing to remap")
        return 0
    saved = golden.save(golden_drift.remap(gs, mapping))
    for old, new in mapping.items():
        info(f"{old} -> {new}")
    info(f"saved {saved.path}")
    return 0


def _draft(args: argparse.Namespace) -> int:
    import yaml

    gs, kb = _load(args)
    nodes = []
    for nid in args.node_ids:
        node = kb.get(nid)
        if node is None:
            raise EngineError(f"unknown node id {nid!r}; see `wikirag tree --kb {args.kb}`")
        nodes.append(node)
    settings = llm_settings(EngineConfig().llm)
    llm = LLMClient(settings) if settings else None
    if llm is None:
        info("no LLM configured: drafting from headings (set OPENAI_BASE_URL, WIKIRAG_LLM_MODEL)")
    drafts = draft_queries(nodes, existing_ids=[i.id for i in gs.items], llm=llm)
    if args.json:
        print_json(drafts)
    else:
        sys.stdout.write(yaml.safe_dump(drafts, allow_unicode=True, sort_keys=False))
    if args.apply:
        for d in drafts:
            gs = golden.with_item(gs, golden.item_from_dict(d))
        saved = golden.save(gs)
        info(f"added {len(drafts)} drafts to {saved.path}; review them before the next eval")
    return 0


def _health(args: argparse.Namespace) -> int:
    from workbench.tune.size_guard import health_of

    ws = workspace(args)
    h = health_of(ws, golden.load(ws.dataset))
    if args.json:
        print_json(h.to_dict())
    else:
        sys.stdout.write(format_health(h))
    return 0


def _sample(args: argparse.Namespace) -> int:
    ws = workspace(args)
    gs = golden.load(ws.dataset)
    if args.promote:
        gs, moved = pending.promote(gs)
        info(f"promoted {len(moved)} questions into {ws.dataset}: {', '.join(moved) or 'none'}")
        return 0
    if not args.from_log:
        raise EngineError("say where to sample from: --from-log (or --promote judged questions)")
    log = query_log.QueryLog(query_log.log_path(ws.index))
    entries = log.entries()
    if not entries:
        raise EngineError(
            f"no logged questions in {log.path}; serve with --log-queries (or set "
            f"${query_log.LOG_ENV}=1) to record some"
        )
    waiting = [i.query for i in pending.load(ws.dataset)]
    picked = query_log.sample(
        entries,
        args.n,
        args.strategy,
        exclude=[i.query for i in gs.items] + waiting,
        seed=args.seed,
    )
    added = pending.add(gs, picked)
    if args.json:
        print_json([{"id": i.id, "query": i.query, "notes": i.notes} for i in added])
    else:
        for i in added:
            sys.stdout.write(f"{i.id}\t{i.query}\t({i.notes})\n")
    info(
        f"{len(added)} questions queued in {pending.path_for(ws.dataset)}; rate their chapters "
        "with `wikirag judge --pending`, then `wikirag golden sample --promote`"
    )
    return 0
