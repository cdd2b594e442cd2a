"""`wikirag optimize`: a seeded Optuna search, cross-validated inside the tune split.

Each trial is a config (``search_space.SEARCH_SPACE``) scored by k-fold cross-validation
on the tune split: the mean over folds of the fold's mean of the primary measure. With
equal folds that mean is the tune mean itself; what the folds add is a spread. The trial
submitted is picked with the one-standard-error rule (Breiman et al. 1984, CART; Hastie,
Tibshirani & Friedman, ESL 2nd ed. 7.10): among trials whose fold scores are within one
standard error of the best trial's (paired over folds), the one that changes the fewest
config keys, then the best scoring. A gain that lives in one fold, or a fifth changed knob
that adds nothing measurable, is noise fitted to these queries, and the baseline itself
(a trial that changes nothing) wins whenever no config beats it by more than that.

The pick then goes through the acceptance rule as ONE experiment (tune decides, holdout
is reported), logged like any other, with the study's trial table written beside the log
(``experiments/<kb>/studies/<study>.json``) and linked from the experiment record.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.config import EngineConfig
from engine.errors import EngineError
from engine.pipeline import MAX_CACHED_POOL, pool_size
from engine.scripts import is_cross_lingual
from workbench.eval import golden
from workbench.eval.evaluate import Evaluator, parent_function
from workbench.eval.messages import Message, join
from workbench.tune import rule as rules
from workbench.tune import size_guard
from workbench.tune.acceptance import Criterion
from workbench.tune.catalog import OPTIMIZER_TIER
from workbench.tune.experiment_log import ExperimentResult
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.experiments import run_experiment
from workbench.tune.search_space import SEARCH_SPACE, ParamSpec, available, baseline_point, suggest
from workbench.tune.study import STUDIES, Study, TrialRow, fold_mean, pick_trial, save_study
from workbench.tune.trial_scoring import ChannelBank, TrialScorer, make_folds
from workbench.workspace import Workspace

# Five folds: with the bundled wiki's 64 tune queries a fold keeps ~13, enough for its mean
# to say something, and five fold scores give a usable standard error; ten folds of six
# queries make every fold mean a coin toss (ESL 7.10 recommends 5 or 10).
K_FOLDS = 5
DEFAULT_TRIALS = 100
DEFAULT_MEASURE = "mrr"  # run_study's default; optimize() takes the rule's primary measure

ProgressFn = Callable[[int, int, str], None]


@dataclass
class Outcome:
    """What `optimize` did: the study, and the one experiment it submitted (if any)."""

    study: Study
    experiment: ExperimentResult | None
    sidecar: Path | None


def run_study(
    evaluator: Evaluator,
    base: EngineConfig,
    items: Sequence[golden.GoldenItem],
    *,
    trials: int = DEFAULT_TRIALS,
    timeout_s: float | None = None,
    seed: int = 0,
    k_folds: int = K_FOLDS,
    measure: str = DEFAULT_MEASURE,
    space: Sequence[ParamSpec] = SEARCH_SPACE,
    progress: ProgressFn | None = None,
    kb: str = "",
    dataset: tuple[str, str] = ("", ""),
) -> Study:
    """Search ``space`` around ``base`` on ``items`` (the tune split); write nothing."""
    import optuna

    if trials < 1:
        raise EngineError(f"--trials must be at least 1, got {trials}")
    if timeout_s is not None and timeout_s <= 0:
        raise EngineError(f"--timeout must be a positive number of seconds, got {timeout_s}")
    specs = available(space)
    folds = make_folds([it.id for it in items], k_folds, seed)
    depth = _deepest_pool(base, specs)
    started = time.perf_counter()
    bank = ChannelBank(evaluator, base, items, depth=depth, progress=progress)
    for spec in specs:
        # An expansion setting the baseline lacks costs one retrieval per query: pay it
        # here, before the search's clock starts, not inside the first trial that asks.
        if spec.key.startswith("expansion.") and spec.kind == "categorical":
            for value in spec.choices:
                bank.terms(base.with_overrides({spec.key: value}))
    evaluator.cache.save()  # the next run (and `wikirag eval`) starts warm
    scorer = TrialScorer(
        bank, folds, measure, parent_function(getattr(evaluator.engine, "kb", None))
    )
    baseline_folds = scorer.fold_scores(base)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    with warnings.catch_warnings():
        # multivariate/group TPE is marked experimental; it models the conditional space
        # (fusion keys only under hybrid) jointly instead of key by key.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.enqueue_trial(baseline_point(specs, base))  # trial 0 is the baseline

    def objective(trial: Any) -> float:
        t0 = time.perf_counter()
        params = suggest(trial, specs, base)
        cfg = base.with_overrides(params)
        scores = scorer.fold_scores(cfg)
        trial.set_user_attr("values", params)  # as applied (grid values rounded)
        trial.set_user_attr("folds", scores)
        trial.set_user_attr("changes", len(base.diff(cfg)))
        trial.set_user_attr("seconds", time.perf_counter() - t0)
        return fold_mean(scores)

    def report(st: Any, frozen: Any) -> None:
        if progress:
            best = st.best_value if any(t.value is not None for t in st.trials) else float("nan")
            progress(len(st.trials), trials, f"trial {frozen.number} best {measure} {best:.4f}")

    search_started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        study.optimize(objective, n_trials=trials, timeout=timeout_s, callbacks=[report])
    search_seconds = time.perf_counter() - search_started

    rows = [_row(t) for t in study.trials]
    best, pick = pick_trial(rows, k_folds)
    dists: dict[str, str] = {}
    for t in study.trials:
        for name, dist in t.distributions.items():
            dists.setdefault(name, optuna.distributions.distribution_to_json(dist))
    now = dt.datetime.now(dt.UTC)
    return Study(
        study_id=now.strftime("%Y%m%d-%H%M%S-") + f"s{seed}",
        created=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        kb=kb,
        dataset=dataset[0],
        dataset_hash=dataset[1],
        base_hash=base.hash,
        measure=scorer.measure,
        k_folds=k_folds,
        seed=seed,
        queries=len(items),
        fold_sizes=[len(f) for f in folds],
        space=[s.to_dict() for s in specs],
        distributions=dists,
        trials=rows,
        baseline_folds=baseline_folds,
        best=best,
        pick=pick,
        budget={"trials": trials, "timeout_s": timeout_s, "search_seconds": search_seconds},
        seconds=time.perf_counter() - started,
        stopped_by="trials" if len(rows) >= trials else "timeout",
    )


def optimize(
    ws: Workspace,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    *,
    trials: int = DEFAULT_TRIALS,
    timeout_s: float | None = None,
    seed: int = 0,
    k_folds: int = K_FOLDS,
    measure: str | None = None,
    progress: ProgressFn | None = None,
    dry_run: bool = False,
    notify: Callable[[str], None] | None = None,
    params: Sequence[str] | None = None,
    narrow: bool = False,
    yes: bool = False,
) -> Outcome:
    """Search, then submit the picked config as one experiment (none if it is the baseline).

    Holds the KB's experiment lock from reading the baseline to submitting (a dry run writes
    nothing and takes no lock), so the pick is judged against the baseline it was found for.
    ``measure`` defaults to the acceptance rule's primary measure: the search optimises what
    the rule will decide on.

    Before anything runs, the size guard (``size_guard``) checks the golden set can carry
    the search: too small, it raises unless ``yes``; ``narrow`` searches only the first
    parameters it can carry, ``params`` only the keys named.
    """
    if trials < 1:
        raise EngineError(f"--trials must be at least 1, got {trials}")
    measure = measure or rules.resolve(ws.experiments).primary
    store = ExperimentStore(ws.experiments)
    gs = golden.load(ws.dataset)
    specs = available(SEARCH_SPACE)
    if params:
        specs = size_guard.select(specs, params)
    records = store.load_records()
    size = size_guard.size_guard(gs, specs, records)
    if not (size.ok or yes or narrow):
        size_guard.check(size, yes=yes)  # refuses before anything is opened or locked
    guard = contextlib.nullcontext() if dry_run else store.writing("optimize", notify)
    with guard:
        specs, note = _fit_space(specs, gs, records, evaluator_for, store, params, narrow, yes)
        if note and notify:  # once the lock is held: a refusal stays the one line it was
            notify(note.render())
        out = _search_and_submit(
            ws,
            store,
            evaluator_for,
            trials,
            timeout_s,
            seed,
            k_folds,
            measure,
            progress,
            dry_run,
            specs,
        )
    if note:
        out.study.add_note(note, first=True)
    return out


def _fit_space(
    specs: Sequence[ParamSpec],
    gs: golden.GoldenSet,
    records: Sequence[Mapping[str, Any]],
    evaluator_for: Callable[[EngineConfig], Evaluator],
    store: ExperimentStore,
    params: Sequence[str] | None,
    narrow: bool,
    yes: bool,
) -> tuple[tuple[ParamSpec, ...], Message | None]:
    """The space the set can search and the note that says how it was cut: keys that move
    no tune query left out (``without_inert``; not when ``params`` names them), then the
    first keys the set carries (``narrow``); raises where the guard refuses the rest."""
    inert = None
    if not params:
        specs, inert = without_inert(specs, gs, evaluator_for(store.baseline_config()))
    size = size_guard.size_guard(gs, specs, records)
    narrowed = None
    if narrow and size.too_few_queries:
        specs = size_guard.narrowed(specs, size)
        keys = ", ".join(s.key for s in specs)
        narrowed = Message(
            "{guard}; --narrow: searching {keys} only", {"guard": size.note(), "keys": keys}
        )
        size = size_guard.size_guard(gs, specs, records)
    kept = [n for n in (inert, narrowed, size_guard.check(size, yes=yes)) if n is not None]
    return tuple(specs), (join(kept) if kept else None)


def _search_and_submit(
    ws: Workspace,
    store: ExperimentStore,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    trials: int,
    timeout_s: float | None,
    seed: int,
    k_folds: int,
    measure: str,
    progress: ProgressFn | None,
    dry_run: bool,
    specs: Sequence[ParamSpec],
) -> Outcome:
    gs = golden.load(ws.dataset)
    base = store.baseline_config()
    items = gs.answerable("tune")
    study = run_study(
        evaluator_for(base),
        base,
        items,
        trials=trials,
        timeout_s=timeout_s,
        seed=seed,
        k_folds=k_folds,
        measure=measure,
        space=specs,
        progress=progress,
        kb=ws.name,
        dataset=(gs.name, gs.content_hash),
    )
    pick = study.trial(study.pick)
    changes = base.diff(base.with_overrides(pick.params)) if pick else {}
    if not changes:
        study.add_note(
            Message(
                "no trial beats the baseline by more than one standard error of its fold "
                "scores; nothing submitted"
            )
        )
        return Outcome(study, None, None if dry_run else save_study(store.folder, study))
    sidecar = None if dry_run else save_study(store.folder, study)
    summary = study.summary()
    cv = summary["cv"]
    result = run_experiment(
        ws,
        evaluator_for,
        {k: new for k, (_, new) in changes.items()},
        title=f"Optuna trial {study.pick} of {len(study.trials)}: "
        + ", ".join(f"{k}={_short(v)}" for k, (_, v) in changes.items()),
        tier=OPTIMIZER_TIER,
        notes=(
            f"{study.k_folds}-fold CV {study.measure} {cv['baseline']:.4f} -> {cv['pick']:.4f} "
            f"(best trial {study.best}: {cv['best']:.4f}; nested-CV estimate of the search's "
            f"pick {cv['selection']:.4f}); {optimism_line(summary)}; seed {study.seed}; "
            f"trials: {STUDIES}/{study.study_id}.json"
        ),
        dry_run=dry_run,
        extra={"optimize": summary},
        confirm=[confirmation(study)],
    )
    if result.no_effect:
        study.add_note(Message("the pick ranks every query as the baseline does; nothing logged"))
    elif not dry_run:
        study.experiment = result.number
    if not dry_run:
        sidecar = save_study(store.folder, study)
    return Outcome(study, result, sidecar)


# Keys that move no query of a set without cross-lingual questions (engine/scripts.py):
# searched there they only take a place the size guard counts.
CROSS_LINGUAL_KEYS = ("fusion.cross_lingual_bm25",)
INERT_NOTE = "not searching {keys}: no tune question is cross-lingual for this index"


def without_inert(
    specs: Sequence[ParamSpec], gs: golden.GoldenSet, evaluator: Evaluator
) -> tuple[tuple[ParamSpec, ...], Message | None]:
    """``specs`` less the keys that cannot move a tune query of ``gs``, and a note naming
    them (None when none is left out)."""
    share = getattr(evaluator.engine, "query_script_share", None)
    items = gs.answerable("tune")
    if share is None or any(is_cross_lingual(share(i.query)) for i in items):
        return tuple(specs), None
    kept = tuple(s for s in specs if s.key not in CROSS_LINGUAL_KEYS)
    if len(kept) == len(specs):
        return kept, None
    return kept, Message(INERT_NOTE, {"keys": ", ".join(CROSS_LINGUAL_KEYS)})


def size_guard_for(ws: Workspace) -> size_guard.SizeGuard:
    """The guard of a full search on this KB's golden set (what the Experiments page shows)."""
    gs = golden.load(ws.dataset)
    records = ExperimentStore(ws.experiments).load_records()
    return size_guard.size_guard(gs, available(SEARCH_SPACE), records)


def confirmation(study: Study) -> Criterion:
    """The decision's unseen-data test: the nested-CV outer-fold gains over the baseline.

    The tune split picked the config, so its gain there is optimistic by construction;
    each outer fold's gain comes from a pick made without that fold. The pick goes
    through only when their mean is positive by more than one standard error (the same
    bar the pick itself had to clear).
    """
    gains = study.confirmed_gains()
    if len(gains) < 2:
        return Criterion(
            "nested-CV gain on unseen folds", math.nan, "> 1 SE", True, "too few folds"
        )
    mean = sum(gains) / len(gains)
    sd = math.sqrt(sum((g - mean) ** 2 for g in gains) / (len(gains) - 1))
    se = sd / math.sqrt(len(gains))
    return Criterion(
        "nested-CV gain on unseen folds",
        mean,
        f"> 1 SE ({se:.4f})",
        mean > 0 and mean > se,
        f"{study.measure} per outer fold: " + ", ".join(f"{g:+.3f}" for g in gains),
    )


def optimism_line(summary: dict[str, Any]) -> str:
    """Tune gain, confirmed gain and their difference, for logs and the CLI."""

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:+.4f}"

    return (
        f"tune gain {f(summary.get('tune_gain'))}, confirmed on unseen folds "
        f"{f(summary.get('confirmed_gain'))}, optimism {f(summary.get('optimism'))}"
    )


def _row(t: Any) -> TrialRow:
    return TrialRow(
        number=t.number,
        params=dict(t.user_attrs.get("values", t.params)),
        value=t.value,
        folds=list(t.user_attrs.get("folds", [])),
        changes=int(t.user_attrs.get("changes", 0)),
        seconds=round(float(t.user_attrs.get("seconds", 0.0)), 4),
        state=t.state.name,
    )


def _deepest_pool(base: EngineConfig, specs: Sequence[ParamSpec]) -> int:
    """Candidates kept per channel: the deepest pool any trial can ask for."""
    mult = next((s for s in specs if s.key == "fusion.multiplier"), None)
    deepest = base.with_overrides({"fusion.multiplier": int(mult.high)}) if mult else base  # type: ignore[arg-type]
    top_k = base.search.top_k
    need = max(pool_size(base, top_k, False), pool_size(deepest, top_k, False))
    if need > MAX_CACHED_POOL:
        raise EngineError(
            f"search.top_k {top_k} x fusion.multiplier needs {need} candidates per channel; "
            f"the evaluation cache keeps {MAX_CACHED_POOL}: lower search.top_k"
        )
    return need


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
