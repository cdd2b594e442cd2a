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
import json
import math
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.atomic import atomic_write_text
from engine.config import EngineConfig
from engine.errors import EngineError
from engine.pipeline import MAX_CACHED_POOL, pool_size
from workbench.eval import golden
from workbench.eval.evaluate import Evaluator, parent_function
from workbench.tune import rule as rules
from workbench.tune.experiment_log import ExperimentResult
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.experiments import run_experiment
from workbench.tune.search_space import SEARCH_SPACE, ParamSpec, available, baseline_point, suggest
from workbench.tune.trial_scoring import ChannelBank, TrialScorer, make_folds
from workbench.workspace import Workspace

# Five folds: with the bundled wiki's 64 tune queries a fold keeps ~13, enough for its mean
# to say something, and five fold scores give a usable standard error; ten folds of six
# queries make every fold mean a coin toss (ESL 7.10 recommends 5 or 10).
K_FOLDS = 5
DEFAULT_TRIALS = 100
DEFAULT_MEASURE = "mrr"  # run_study's default; optimize() takes the rule's primary measure
STUDIES = "studies"
TIER = "optimize (Optuna TPE, cross-validated)"

ProgressFn = Callable[[int, int, str], None]


@dataclass(frozen=True)
class TrialRow:
    """One trial: its values for the searched keys and its fold scores."""

    number: int
    params: dict[str, Any]
    value: float | None  # mean of the fold scores; None when the trial failed
    folds: list[float]
    changes: int  # config keys that differ from the baseline
    seconds: float
    state: str = "COMPLETE"


@dataclass
class Study:
    """A finished search: settings, every trial, the best and the picked trial."""

    study_id: str
    created: str
    kb: str
    dataset: str
    dataset_hash: str
    base_hash: str
    measure: str
    k_folds: int
    seed: int
    queries: int
    fold_sizes: list[int]
    space: list[dict[str, Any]]
    distributions: dict[str, str]  # param -> optuna distribution JSON (to rebuild the study)
    trials: list[TrialRow]
    baseline_folds: list[float]
    best: int | None
    pick: int | None
    budget: dict[str, Any]
    seconds: float
    stopped_by: str  # "trials" | "timeout"
    experiment: int | None = None
    notes: list[str] = field(default_factory=list)

    def trial(self, number: int | None) -> TrialRow | None:
        return next((t for t in self.trials if t.number == number), None)

    @property
    def baseline_score(self) -> float:
        return _mean(self.baseline_folds)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["baseline_score"] = self.baseline_score
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Study:
        d = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        d["trials"] = [TrialRow(**t) for t in data.get("trials", [])]
        return cls(**d)

    def summary(self) -> dict[str, Any]:
        """What the experiment record carries (the full table stays in the sidecar)."""
        best, pick = self.trial(self.best), self.trial(self.pick)
        return {
            "study": self.study_id,
            "trials_file": f"{STUDIES}/{self.study_id}.json",
            "trials": len(self.trials),
            "measure": self.measure,
            "k_folds": self.k_folds,
            "seed": self.seed,
            "stopped_by": self.stopped_by,
            "seconds": round(self.seconds, 2),
            "cv": {
                "baseline": self.baseline_score,
                "best": best.value if best else None,
                "pick": pick.value if pick else None,
                "selection": selection_estimate(self.trials, self.k_folds),
            },
            "best_trial": self.best,
            "picked_trial": self.pick,
            "picked_params": pick.params if pick else {},
        }


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
        return _mean(scores)

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


def pick_trial(rows: Sequence[TrialRow], k_folds: int) -> tuple[int | None, int | None]:
    """(best trial, picked trial) by the one-standard-error rule (module docstring).

    A trial is within one standard error of the best when the mean of its per-fold
    shortfall d_f = best_f - trial_f is at most sd(d) / sqrt(k) (paired over folds: the
    folds share queries, so their difficulty cancels out).
    """
    done = [r for r in rows if r.value is not None and len(r.folds) == k_folds]
    if not done:
        return None, None
    best = max(done, key=lambda r: (r.value, -r.number))

    def close(r: TrialRow) -> bool:
        d = [b - x for b, x in zip(best.folds, r.folds, strict=True)]
        mean = _mean(d)
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1)) if len(d) > 1 else 0.0
        return mean <= sd / math.sqrt(len(d)) + 1e-12

    pick = min((r for r in done if close(r)), key=lambda r: (r.changes, -r.value, r.number))
    return best.number, pick.number


def selection_estimate(rows: Sequence[TrialRow], k_folds: int) -> float | None:
    """What "take the best trial" scores on queries it was not chosen on (nested CV).

    For each fold f the trial with the best mean over the other folds is chosen and scored
    on f; the estimate is the mean of those scores. The best trial's own CV mean is biased
    upwards by the search (the maximum of many noisy means, the winner's curse); this is
    not, so the gap between the two is the part of the gain that is fitted noise.
    """
    done = [r for r in rows if r.value is not None and len(r.folds) == k_folds]
    if not done or k_folds < 2:
        return None
    picked = []
    for f in range(k_folds):

        def train(r: TrialRow, f: int = f) -> tuple[float, int]:
            return (_mean([x for g, x in enumerate(r.folds) if g != f]), -r.number)

        picked.append(max(done, key=train).folds[f])
    return _mean(picked)


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
) -> Outcome:
    """Search, then submit the picked config as one experiment (none if it is the baseline).

    Holds the KB's experiment lock from reading the baseline to submitting (a dry run writes
    nothing and takes no lock), so the pick is judged against the baseline it was found for.
    ``measure`` defaults to the acceptance rule's primary measure: the search optimises what
    the rule will decide on.
    """
    measure = measure or rules.resolve(ws.experiments).primary
    store = ExperimentStore(ws.experiments)
    guard = contextlib.nullcontext() if dry_run else store.writing("optimize", notify)
    with guard:
        return _search_and_submit(
            ws, store, evaluator_for, trials, timeout_s, seed, k_folds, measure, progress, dry_run
        )


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
        progress=progress,
        kb=ws.name,
        dataset=(gs.name, gs.content_hash),
    )
    pick = study.trial(study.pick)
    changes = base.diff(base.with_overrides(pick.params)) if pick else {}
    if not changes:
        study.notes.append(
            "no trial beats the baseline by more than one standard error of its fold "
            "scores; nothing submitted"
        )
        return Outcome(study, None, None if dry_run else save_study(store.folder, study))
    sidecar = None if dry_run else save_study(store.folder, study)
    cv = study.summary()["cv"]
    result = run_experiment(
        ws,
        evaluator_for,
        {k: new for k, (_, new) in changes.items()},
        title=f"Optuna trial {study.pick} of {len(study.trials)}: "
        + ", ".join(f"{k}={_short(v)}" for k, (_, v) in changes.items()),
        tier=TIER,
        notes=(
            f"{study.k_folds}-fold CV {study.measure} {cv['baseline']:.4f} -> {cv['pick']:.4f} "
            f"(best trial {study.best}: {cv['best']:.4f}; nested-CV estimate of the search's "
            f"pick {cv['selection']:.4f}); seed {study.seed}; "
            f"trials: {STUDIES}/{study.study_id}.json"
        ),
        dry_run=dry_run,
        extra={"optimize": study.summary()},
    )
    if result.no_effect:
        study.notes.append("the pick ranks every query as the baseline does; nothing logged")
    elif not dry_run:
        study.experiment = result.number
    if not dry_run:
        sidecar = save_study(store.folder, study)
    return Outcome(study, result, sidecar)


def save_study(folder: str | Path, study: Study) -> Path:
    path = Path(folder) / STUDIES / f"{study.study_id}.json"
    atomic_write_text(path, json.dumps(study.to_dict(), ensure_ascii=False, indent=1) + "\n")
    return path


def load_studies(folder: str | Path) -> list[Study]:
    """The KB's studies, oldest first (unreadable files are skipped: they are ours)."""
    out = []
    for path in sorted((Path(folder) / STUDIES).glob("*.json")):
        try:
            out.append(Study.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError, KeyError):
            continue
    return out


def study_figures(study: Study) -> dict[str, Any]:
    """Optuna's plotly figures for a stored study: optimization history, parameter importance.

    The study is rebuilt from the trial table, so the figures come from any sidecar. The
    importance (fANOVA, seeded) is computed over the keys of the largest group of trials that
    share a search mode and vary some key: conditional keys exist only in some trials, and
    Optuna rates only keys present in every trial it looks at.
    """
    import optuna
    from optuna.distributions import json_to_distribution

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    st = optuna.create_study(direction="maximize")
    for row in study.trials:
        if row.value is None:
            continue
        st.add_trial(
            optuna.trial.create_trial(
                params=row.params,
                distributions={k: json_to_distribution(study.distributions[k]) for k in row.params},
                value=row.value,
            )
        )
    figs: dict[str, Any] = {}
    if not st.trials:
        return figs
    hist = optuna.visualization.plot_optimization_history(st, target_name=study.measure)
    hist.update_layout(title=f"Optimization history ({study.k_folds}-fold CV {study.measure})")
    figs["history"] = hist
    params, group = _importance_params(study.trials)
    # fANOVA over the group's trials only: a trial lacking one of the keys (another mode's
    # conditional keys) makes Optuna refuse the whole rating.
    gst = optuna.create_study(direction="maximize")
    for row in group:
        gst.add_trial(
            optuna.trial.create_trial(
                params=row.params,
                distributions={k: json_to_distribution(study.distributions[k]) for k in row.params},
                value=row.value,
            )
        )
    if len(gst.trials) >= 2 and params:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                imp = optuna.visualization.plot_param_importances(
                    gst,
                    evaluator=optuna.importance.FanovaImportanceEvaluator(seed=study.seed),
                    params=params,
                    target_name=study.measure,
                )
            except (ValueError, RuntimeError):  # e.g. every trial scored the same
                imp = None
        if imp is not None:
            imp.update_layout(title="Parameter importance (fANOVA)")
            figs["importance"] = imp
    return figs


def _importance_params(rows: Sequence[TrialRow]) -> tuple[list[str], list[TrialRow]]:
    """The keys to rate and the trials to rate them on: the largest group of trials sharing
    a search mode and a set of keys, with some key varied."""
    groups: dict[str, list[TrialRow]] = {}
    for r in rows:
        if r.value is not None:
            key = json.dumps([r.params.get("search.mode"), sorted(r.params)])
            groups.setdefault(key, []).append(r)
    scored = [r for r in rows if r.value is not None]
    every = sorted(set.intersection(*(set(r.params) for r in scored))) if scored else []
    # ... and, when no such group varies in score, every trial over the keys all share
    # (the search mode at least): what the study learned is then which mode matters.
    for group, keys in [
        *((g, sorted(g[0].params)) for g in sorted(groups.values(), key=len, reverse=True)),
        (scored, every),
    ]:
        varied = [k for k in keys if len({json.dumps(r.params[k]) for r in group}) > 1]
        if varied and len({r.value for r in group}) > 1:
            return varied, group
    return [], []


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


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


def _short(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)
