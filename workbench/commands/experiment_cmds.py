"""`wikirag experiment try|rule|log|restore|versions` and `wikirag optimize`."""

from __future__ import annotations

import argparse
import sys

from engine.config import EngineConfig
from engine.errors import EngineError
from workbench.commands.common import (
    add_allow_invalid_arg,
    add_kb_args,
    add_set_arg,
    info,
    print_json,
    set_overrides,
    workspace,
)
from workbench.eval import golden
from workbench.eval.engines import evaluator
from workbench.progress import StderrBar
from workbench.tune.rule import RULE_FILE, resolve
from workbench.workspace import Workspace

RULE_HELP = (
    "statistical | strict | a rule.yaml file (default: experiments/<kb>/rule.yaml if present, "
    "else statistical)"
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="try one change against the baseline; log; restore")
    es = p.add_subparsers(dest="experiment_command", metavar="ACTION")
    t = es.add_parser("try", help="evaluate baseline + one change on tune; accept or roll back")
    add_kb_args(t, index=True)
    add_set_arg(t, required=True)
    t.add_argument("--strategy", default="manual", help="strategy tier / note for the log")
    t.add_argument("--title", default=None)
    t.add_argument("--notes", default="")
    t.add_argument("--dry-run", action="store_true", help="decide but write nothing")
    t.add_argument(
        "--again",
        action="store_true",
        help="run it even when the log has this change against this baseline and golden set",
    )
    add_allow_invalid_arg(t)
    t.add_argument("--rule", default=None, help=RULE_HELP)
    t.set_defaults(func=_try)
    ru = es.add_parser("rule", help="show the acceptance rule experiments are decided by")
    add_kb_args(ru, index=True)
    ru.add_argument("--rule", default=None, help=RULE_HELP)
    ru.set_defaults(func=_rule)
    lg = es.add_parser("log", help="print the score trajectory and the log's decisions")
    add_kb_args(lg, index=True)
    lg.set_defaults(func=_log)
    r = es.add_parser("restore", help="make accepted baseline version N the baseline again")
    add_kb_args(r, index=True)
    r.add_argument("version", type=int)
    r.set_defaults(func=_restore)
    v = es.add_parser("versions", help="list the accepted baseline versions")
    add_kb_args(v, index=True)
    v.set_defaults(func=_versions)
    p.set_defaults(func=lambda a: p.print_help())

    o = sub.add_parser(
        "optimize",
        help="search fusion, BM25, expansion, pool and mode (Optuna, cross-validated); "
        "submit the pick as one experiment",
    )
    add_kb_args(o, index=True)
    o.add_argument("--trials", type=int, default=None, help="trial budget (default 100)")
    o.add_argument("--timeout", type=float, default=None, help="seconds budget for the search")
    o.add_argument("--seed", type=int, default=0, help="seeds the sampler and the folds")
    o.add_argument("--folds", type=int, default=None, help="cross-validation folds (default 5)")
    o.add_argument(
        "--measure", default=None, help="measure to optimise (default: the rule's primary)"
    )
    o.add_argument("--dry-run", action="store_true", help="search and decide but write nothing")
    o.add_argument(
        "--yes", action="store_true", help="search even when the golden set is too small for it"
    )
    o.add_argument(
        "--narrow", action="store_true", help="search only the parameters the set can carry"
    )
    o.add_argument("--params", default=None, help="comma list of keys to search (default: all)")
    o.add_argument(
        "--catalog", action="store_true", help="walk the strategy catalog one change at a time"
    )
    o.add_argument("--budget", type=int, default=None, help="--catalog: max experiments (10)")
    o.add_argument("--tiers", default=None, help="--catalog: comma list of tiers (1,2)")
    o.set_defaults(func=_optimize)


def _evaluator_for(ws: Workspace):
    return lambda cfg: evaluator(ws, cfg)


def _print_result(res, as_json: bool, dry_run: bool = False) -> None:
    if as_json:
        print_json({**res.to_record(), "verdict": readable_verdict(res, dry_run).to_dict()})
        return
    d = res.decision
    out = [
        f"Experiment {res.number}: {res.title}",
        "  change: " + "; ".join(f"{k}: {a!r} -> {b!r}" for k, (a, b) in res.changes.items()),
    ]
    out.append(f"  rule: {d.rule.name} (primary {d.rule.primary}, alpha {d.rule.alpha:g})")
    for c in d.criteria:
        out.append(
            f"  [{'PASS' if c.passed else 'FAIL'}] {c.name:<40} {c.shown:>8}  (needs {c.threshold})"
            + (f"  {c.detail}" if c.detail else "")
        )
    c5, cm = d.comparisons["recall@5"], d.comparisons["mrr"]
    out.append(
        f"  recall@5 {c5.mean_a:.3f} -> {c5.mean_b:.3f}  95% CI [{c5.ci_low:+.3f}, {c5.ci_high:+.3f}] "
        f"p={c5.p_value:.3f}  wins/losses/ties {c5.wins}/{c5.losses}/{c5.ties}"
    )
    out.append(
        f"  mrr      {cm.mean_a:.3f} -> {cm.mean_b:.3f}  95% CI [{cm.ci_low:+.3f}, {cm.ci_high:+.3f}] p={cm.p_value:.3f}"
    )
    out.append(
        f"  holdout  recall@5 {res.base_holdout.get('recall@5', 0):.3f} -> {res.cand_holdout.get('recall@5', 0):.3f}"
        f"   mrr {res.base_holdout.get('mrr', 0):.3f} -> {res.cand_holdout.get('mrr', 0):.3f}"
    )
    moves = res.extra.get("queries") or {}
    for kind in ("improved", "regressed"):
        rows = moves.get(kind) or []
        if rows:
            out.append(
                f"  {kind} ({d.rule.primary}): "
                + ", ".join(f"{r['id']} {r['delta']:+.3f}" for r in rows)
            )
    verdict = "ACCEPTED (new baseline)" if d.accepted else "ROLLED BACK"
    if res.no_effect:
        out.append("  decision: NO EFFECT (every ranking identical; not logged as an experiment)")
        sys.stdout.write("\n".join(out) + "\n")
        return
    if dry_run:
        verdict = ("would be ACCEPTED" if d.accepted else "would be ROLLED BACK") + " (dry run)"
    out.append("  decision: " + verdict)
    out.append("  verdict: " + readable_verdict(res, dry_run).text())
    sys.stdout.write("\n".join(out) + "\n")


def readable_verdict(res, dry_run: bool = False):
    """The experiment's verdict in plain words (workbench.tune.verdict)."""
    from workbench.tune.verdict import from_decision

    outcome = res.verdict
    if dry_run and not res.no_effect:
        outcome = "would be accepted" if res.decision.accepted else "would be rolled back"
    return from_decision(res.decision, outcome)


def _try(args: argparse.Namespace) -> int:
    from workbench.tune.experiments import run_experiment

    ws = workspace(args)
    rule = resolve(ws.experiments, args.rule)  # a bad --rule fails before any evaluation
    if not args.again:
        from workbench.tune.experiment_store import ExperimentStore
        from workbench.tune.tried import earlier_try

        before = earlier_try(
            ExperimentStore(ws.experiments),
            set_overrides(args),
            golden.load(ws.dataset).content_hash,
        )
        if before is not None:
            if args.json:
                print_json({"already_tried": before.to_dict()})
            else:
                sys.stdout.write(
                    before.message.render() + "\nrun it again with --again, or try another "
                    "change (`wikirag scorecard` suggests some)\n"
                )
            return 1
    res = run_experiment(
        ws,
        _evaluator_for(ws),
        set_overrides(args),
        title=args.title,
        tier=args.strategy,
        notes=args.notes,
        dry_run=args.dry_run,
        notify=info,
        allow_invalid=args.allow_invalid,
        rule=rule,
    )
    _print_result(res, args.json, args.dry_run)
    return 0


def _rule(args: argparse.Namespace) -> int:
    ws = workspace(args)
    rule = resolve(ws.experiments, args.rule)
    own = ws.experiments / RULE_FILE
    where = (
        f"--rule {args.rule}"
        if args.rule
        else (str(own) if own.is_file() else f"preset (no {own})")
    )
    if args.json:
        print_json({"source": where, "rule": rule.to_dict()})
        return 0
    sys.stdout.write(f"# effective acceptance rule, from {where}\n{rule.to_yaml()}")
    return 0


def _log(args: argparse.Namespace) -> int:
    from workbench.tune.experiment_history import trajectory
    from workbench.tune.experiment_store import ExperimentStore

    store = ExperimentStore(workspace(args).experiments)
    points = trajectory(store)
    if args.json:
        print_json({"trajectory": points, "records": store.load_records()})
        return 0
    if not points:
        sys.stdout.write("no experiments yet; run `wikirag experiment try --set fusion.k=30`\n")
        return 0
    sys.stdout.write(
        f"{'exp':>4}  {'decision':<12} {'recall@5':>9} {'mrr':>7} {'hit@5':>7}  title\n"
    )
    for p in points:
        bar = "#" * round(40 * p.get("recall@5", 0))
        sys.stdout.write(
            f"{p['experiment']:>4}  {p['decision']:<12} {p.get('recall@5', 0):>9.3f} "
            f"{p.get('mrr', 0):>7.3f} {p.get('hit@5', 0):>7.3f}  {p.get('title', '')[:50]}\n"
            f"{'':>19}{bar}\n"
        )
    sys.stdout.write(f"log: {store.log_md}\n")
    return 0


def _restore(args: argparse.Namespace) -> int:
    from workbench.tune.experiment_store import ExperimentStore

    cfg = ExperimentStore(workspace(args).experiments).restore(args.version, notify=info)
    info(f"baseline is now version {args.version} (config {cfg.hash})")
    return 0


def _versions(args: argparse.Namespace) -> int:
    from workbench.tune.experiment_store import ExperimentStore

    store = ExperimentStore(workspace(args).experiments)
    rows = []
    for v in store.accepted_versions():
        cfg = EngineConfig.load(v["path"])
        rows.append({**v, "hash": cfg.hash, "current": cfg.hash == store.baseline_config().hash})
    if args.json:
        print_json(rows)
    else:
        for r in rows:
            sys.stdout.write(
                f"v{r['version']}  {r['hash']}  {'(current)' if r['current'] else ''}\n"
            )
        if not rows:
            sys.stdout.write("no baseline versions yet; accept an experiment first\n")
    return 0


def _optimize(args: argparse.Namespace) -> int:
    catalog_only = [
        f for f, v in (("--budget", args.budget), ("--tiers", args.tiers)) if v is not None
    ]
    search_flags = (
        ("--trials", args.trials),
        ("--timeout", args.timeout),
        ("--folds", args.folds),
        ("--measure", args.measure),
        ("--dry-run", args.dry_run or None),
        ("--yes", args.yes or None),
        ("--narrow", args.narrow or None),
        ("--params", args.params),
    )
    search_only = [f for f, v in search_flags if v is not None]
    if args.catalog and search_only:
        raise EngineError(f"{', '.join(search_only)} belong to the search, not to --catalog")
    if catalog_only and not args.catalog:
        raise EngineError(
            f"{', '.join(catalog_only)} belong to the catalog walk: add --catalog "
            "(the search's budget is --trials / --timeout)"
        )
    if args.catalog:
        return _optimize_catalog(args)
    return _optimize_search(args)


def _optimize_search(args: argparse.Namespace) -> int:
    from workbench.tune.optimizer import (  # deferred: loads lancedb (~2 s)
        DEFAULT_TRIALS,
        K_FOLDS,
        optimism_line,
        optimize,
    )

    ws = workspace(args)
    trials = DEFAULT_TRIALS if args.trials is None else args.trials
    # delay: no bar is drawn before work starts, so a refusal (another experiment holds
    # the KB's lock) stays the one-line error the CLI promises
    with StderrBar(unit="it", disable=args.json, delay=0.5) as show:
        out = optimize(
            ws,
            _evaluator_for(ws),
            trials=trials,
            timeout_s=args.timeout,
            seed=args.seed,
            k_folds=K_FOLDS if args.folds is None else args.folds,
            measure=args.measure,
            progress=show,
            dry_run=args.dry_run,
            notify=info,
            params=[k.strip() for k in args.params.split(",") if k.strip()]
            if args.params
            else None,
            narrow=args.narrow,
            yes=args.yes,
        )
    study, res = out.study, out.experiment
    if args.json:
        print_json(
            {
                "study": study.to_dict(),
                "trials_file": str(out.sidecar) if out.sidecar else None,
                "experiment": res.to_record() if res else None,
            }
        )
        return 0
    summ = study.summary()
    cv = summ["cv"]
    lines = [
        f"{len(study.trials)} trials in {study.budget['search_seconds']:.1f} s "
        f"(stopped by {study.stopped_by}; seed {study.seed}); {study.k_folds}-fold CV on "
        f"{study.queries} tune queries, {study.measure}",
        f"  baseline        {cv['baseline']:.4f}",
        f"  best trial {study.best:<4} {cv['best']:.4f}",
        f"  picked trial {study.pick:<2} {cv['pick']:.4f}  (one-standard-error rule: fewest "
        "changed keys within one SE of the best)",
        f"  nested CV       {cv['selection']:.4f}  (best trial chosen on {study.k_folds - 1} "
        "folds, scored on the one left out: the pick's worth on queries it did not see)",
        f"  {optimism_line(summ)}",
    ]
    if out.sidecar:
        lines.append(f"  trials: {out.sidecar}")
    lines += [f"  {n}" for n in study.notes]
    sys.stdout.write("\n".join(lines) + "\n")
    if res is not None:
        _print_result(res, False, args.dry_run)
    return 0


def _optimize_catalog(args: argparse.Namespace) -> int:
    from workbench.tune.catalog_walk import optimize
    from workbench.tune.experiment_store import ExperimentStore

    ws = workspace(args)
    tiers_text = "1,2" if args.tiers is None else args.tiers
    budget = 10 if args.budget is None else args.budget
    try:
        tiers = {int(t) for t in tiers_text.split(",") if t.strip()}
    except ValueError as exc:
        raise EngineError(f"--tiers must be a comma list of 1-4, got {tiers_text!r}") from exc
    if not tiers or not tiers <= {1, 2, 3, 4}:
        raise EngineError(f"--tiers must be a comma list of 1-4, got {tiers_text!r}")
    if budget < 1:
        raise EngineError(f"--budget must be at least 1, got {budget}")
    store = ExperimentStore(ws.experiments)
    with store.writing("optimize", info):  # one writer per KB for the whole run
        before = store.baseline_config()
        results = optimize(
            ws,
            _evaluator_for(ws),
            budget=budget,
            tiers=tiers,
            progress=lambda i, n, name: info(f"[{i}/{n}] {name}"),
        )
        after = store.baseline_config()
    if args.json:
        print_json(
            {
                "before": before.hash,
                "after": after.hash,
                "experiments": [r.to_record() for r in results],
            }
        )
        return 0
    for r in results:
        _print_result(r, False)
    first, last = (results[0], results[-1]) if results else (None, None)
    if first and last:
        acc = [r for r in results if r.decision.accepted]
        final_t = acc[-1].cand_tune if acc else first.base_tune
        final_h = acc[-1].cand_holdout if acc else first.base_holdout
        sys.stdout.write(
            f"\n{len(acc)} of {len(results)} changes accepted; baseline {before.hash} -> {after.hash}\n"
            f"tune:    recall@5 {first.base_tune.get('recall@5', 0):.3f} -> {final_t.get('recall@5', 0):.3f}, "
            f"mrr {first.base_tune.get('mrr', 0):.3f} -> {final_t.get('mrr', 0):.3f}\n"
            f"holdout: recall@5 {first.base_holdout.get('recall@5', 0):.3f} -> {final_h.get('recall@5', 0):.3f}, "
            f"mrr {first.base_holdout.get('mrr', 0):.3f} -> {final_h.get('mrr', 0):.3f}"
            "  (decisions used tune only)\n"
        )
    return 0
