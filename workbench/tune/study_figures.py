"""Optuna's plotly figures for a stored study: optimization history, parameter importance."""

from __future__ import annotations

import json
import warnings
from collections.abc import Sequence
from typing import Any

from workbench.eval.messages import Message
from workbench.tune.study import Study, TrialRow

# fANOVA rates a key by how much of the score's variance it explains across trials; with
# fewer than about ten trials per rated key the ranking moves with the next trial or seed.
IMPORTANCE_TRIALS_PER_PARAM = 10


def importance_caveat(trials: int, params: int) -> Message | None:
    """The caveat parameter importance carries when ``trials`` are few for ``params`` keys
    (fewer than IMPORTANCE_TRIALS_PER_PARAM per key), None when there are enough."""
    need = IMPORTANCE_TRIALS_PER_PARAM * max(params, 1)
    if trials >= need:
        return None
    return Message(
        "rough: {trials} trials for {params} parameters; importance settles at about {need} "
        "({per} per parameter), so read it as a hint, not a ranking",
        {"trials": trials, "params": params, "need": need, "per": IMPORTANCE_TRIALS_PER_PARAM},
    )


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
            caveat = importance_caveat(len(gst.trials), len(params))
            title = "Parameter importance (fANOVA)"
            if caveat is not None:
                # the caveat travels with the figure, wherever it is shown
                title += f"<br><sup>{caveat.render()}</sup>"
            imp.update_layout(title=title)
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
