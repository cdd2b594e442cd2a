"""Every scorecard weakness ends in something runnable: an experiment (``key=value``), a
sweep over the key it is about (the current value included), the optimizer on the space
the set can carry, or, when the catalog has nothing left to try, what would let the
golden set tell more ("cannot detect changes below 0.04 MRR: add ~40 queries")."""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.config import EngineConfig
from workbench.eval.golden import GoldenSet
from workbench.eval.health import mde, spread_from_comparison
from workbench.eval.messages import Message, Translate
from workbench.eval.percentiles import percentile
from workbench.tune.search_space import SEARCH_SPACE, ParamSpec

KINDS = ("experiment", "sweep", "optimize", "grow_golden_set")
SWEEP_POINTS = 5
PRIMARY = "mrr"


@dataclass(frozen=True)
class NextStep:
    kind: str  # one of KINDS
    args: Mapping[str, Any]
    command: str  # the CLI line that runs it ("" for grow_golden_set: it is work, not a run)
    message: Message = field(default_factory=lambda: Message(""))

    def to_dict(self, translate: Translate | None = None) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "args": dict(self.args),
            "command": self.command,
            "text": self.message.render(translate),
            "message": self.message.to_dict(),
        }


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, float):
        return str(int(v)) if v.is_integer() else f"{v:.4g}"
    return str(v)


def experiment_step(overrides: Mapping[str, Any], why: Message | str = "") -> NextStep:
    sets = " ".join(f"--set {shlex.quote(f'{k}={_fmt(v)}')}" for k, v in overrides.items())
    change = ", ".join(f"{k}={_fmt(v)}" for k, v in overrides.items())
    return NextStep(
        "experiment",
        {"overrides": dict(overrides)},
        f"wikirag experiment try {sets}",
        Message("try {change}: {why}", {"change": change, "why": why})
        if str(why)
        else Message("try {change}", {"change": change}),
    )


def sweep_values(spec: ParamSpec, current: Any, also: Sequence[Any] = ()) -> list[Any]:
    """A few values of a numeric key around ``current``, the current value always among them."""
    if spec.kind == "categorical":
        return list(spec.choices)
    lo, hi = float(spec.low or 0.0), float(spec.high or 1.0)
    cur = float(current) if isinstance(current, int | float) else (lo + hi) / 2
    if spec.log and cur > 0:
        raw = [cur / 4, cur / 2, cur, cur * 2, cur * 4]
    else:
        span = (hi - lo) / (SWEEP_POINTS - 1)
        raw = [cur - 2 * span, cur - span, cur, cur + span, cur + 2 * span]
    raw += [float(a) for a in also if isinstance(a, int | float) and not isinstance(a, bool)]
    out: list[Any] = []
    for v in sorted({round(min(max(x, lo), hi), 4) for x in raw} | {round(cur, 4)}):
        value: Any = round(v) if spec.kind == "int" else float(f"{v:.3g}")
        if value not in out:
            out.append(value)
    if spec.kind != "int" and float(f"{cur:.3g}") != cur:
        out = sorted({*out, cur})
    return out


def sweep_step(spec: ParamSpec, cfg: EngineConfig, also: Sequence[Any] = ()) -> NextStep:
    current = cfg.get(spec.key)
    values = sweep_values(spec, current, also)
    grid = f"{spec.key}=" + ",".join(_fmt(v) for v in values)
    return NextStep(
        "sweep",
        {"key": spec.key, "values": values, "current": current},
        f"wikirag sweep --grid {shlex.quote(grid)}",
        Message(
            "sweep {key} over {values} (now {current})",
            {
                "key": spec.key,
                "values": ", ".join(_fmt(v) for v in values),
                "current": _fmt(current),
            },
        ),
    )


def optimize_step() -> NextStep:
    return NextStep(
        "optimize",
        {"narrow": True},
        "wikirag optimize --narrow",
        Message("let the optimizer search the parameters this golden set can carry"),
    )


def detectable_change(
    gs: GoldenSet, history: Sequence[Mapping[str, Any]], split: str = "tune"
) -> tuple[float, float] | None:
    """(MDE of MRR on ``split``, the median per-query spread) from the logged experiments'
    paired CIs at alpha 0.05 / power 0.8; None without experiments to measure it from."""
    sds = [
        sd
        for rec in history
        if (
            sd := spread_from_comparison(
                ((rec.get("details") or {}).get("comparisons") or {}).get(PRIMARY) or {}
            )
        )
    ]
    n = len(gs.answerable(split))
    if not sds or n < 1:
        return None
    sd = percentile(sds, 50)
    return mde(sd, n), sd


def grow_step(gs: GoldenSet, history: Sequence[Mapping[str, Any]]) -> NextStep | None:
    """What would let the set tell more: the change it cannot detect and how many tune
    queries would halve that (an MDE falls with the square root of the queries)."""
    found = detectable_change(gs, history)
    if found is None:
        return None
    floor, _ = found
    n = len(gs.answerable("tune"))
    add = 3 * n  # 4x the queries halves the MDE
    cats = Counter(str(i.category) or "(none)" for i in gs.answerable())
    smallest = min(sorted(cats), key=lambda c: cats[c]) if cats else "(none)"
    return NextStep(
        "grow_golden_set",
        {"mde": round(floor, 4), "tune_queries": n, "add": add, "category": smallest},
        "wikirag golden health",
        Message(
            "the golden set cannot detect changes below {mde} MRR: add ~{add} queries "
            "(the smallest category is {category}) to detect half that",
            {"mde": f"{floor:.3f}", "add": add, "category": smallest},
        ),
    )


def _spec(key: str) -> ParamSpec | None:
    return next((s for s in SEARCH_SPACE if s.key == key and s.kind != "categorical"), None)


def next_steps(
    fresh: Mapping[str, Any] | None,
    others: Sequence[Mapping[str, Any]],
    cfg: EngineConfig,
    gs: GoldenSet | None,
    history: Sequence[Mapping[str, Any]],
) -> tuple[NextStep, ...]:
    """The runnable steps for one weakness: its untried experiment (``fresh``, a catalog
    entry ``{"overrides", "why"}``), a sweep over the numeric key its suggestions are about
    (``others``: the tried or disabled ones too), and when nothing is left untried, the
    optimizer and what the golden set would need."""
    steps: list[NextStep] = []
    if fresh:
        steps.append(experiment_step(fresh["overrides"], fresh.get("why", "")))
    keyed: dict[str, list[Any]] = {}
    for e in (fresh, *others):
        for k, v in ((e or {}).get("overrides") or {}).items():
            if _spec(k) is not None:
                keyed.setdefault(k, []).append(v)
    if keyed:
        key, tried = next(iter(keyed.items()))
        spec = _spec(key)
        assert spec is not None
        steps.append(sweep_step(spec, cfg, tried))
    if not fresh:
        steps.append(optimize_step())
        if gs is not None and (grow := grow_step(gs, history)) is not None:
            steps.append(grow)
    return tuple(steps)


__all__ = ["KINDS", "NextStep", "detectable_change", "next_steps"]
