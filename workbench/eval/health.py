"""What a golden set can tell apart: size, judged depth, unjudged share, saturation, MDE.

The minimum detectable effect (MDE) is the smallest true change in mean MRR that a paired
test at ``alpha`` finds with probability ``power``, given how much per-query differences
spread between configs on *this* set (Cohen 1988, paired design, normal approximation)::

    MDE = (z_{1 - alpha/2} + z_{power}) * sd(diff) / sqrt(n)

The spread comes from the set's own history: each logged experiment's bootstrap CI of the
MRR delta (its width is about 2 * 1.96 * sd / sqrt(n)), and every pair of saved runs of
different configs on the same queries (their per-query differences directly). The median
spread gives the MDE of a typical change; a change smaller than it is, more often than
not, invisible on this set. tests/workbench/test_health.py checks by simulation that an
effect of the stated size is found by the project's randomization test at about ``power``.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from statistics import NormalDist
from typing import Any

from workbench.eval.golden import SPLITS, GoldenSet
from workbench.eval.percentiles import percentile
from workbench.eval.run_record import UNJUDGED_K, RunRecord

PRIMARY = "mrr"


def mde(sd: float, n: int, *, alpha: float = 0.05, power: float = 0.8) -> float:
    """Smallest true mean paired difference detected with ``power`` (two-sided ``alpha``)."""
    if n < 1:
        raise ValueError("n must be at least 1 query")
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError("alpha and power must lie strictly between 0 and 1")
    z = NormalDist()
    return (z.inv_cdf(1 - alpha / 2) + z.inv_cdf(power)) * sd / math.sqrt(n)


def spread_from_comparison(comparison: Mapping[str, Any], alpha: float = 0.05) -> float | None:
    """sd of per-query differences implied by a logged comparison's bootstrap CI."""
    try:
        n = int(comparison["wins"]) + int(comparison["losses"]) + int(comparison["ties"])
        width = float(comparison["ci_high"]) - float(comparison["ci_low"])
    except (KeyError, TypeError, ValueError):
        return None
    if n < 2 or width <= 0:
        return None
    return width * math.sqrt(n) / (2 * NormalDist().inv_cdf(1 - alpha / 2))


def spread_of_runs(a: Mapping[str, float], b: Mapping[str, float]) -> float | None:
    """sd of the per-query differences of two runs on the queries they share."""
    diffs = [b[q] - a[q] for q in sorted(set(a) & set(b))]
    return statistics.stdev(diffs) if len(diffs) >= 2 else None


@dataclass(frozen=True)
class GoldenHealth:
    dataset: str
    dataset_hash: str
    queries: dict[str, int]  # per split (answerable), plus "all" and "unanswerable"
    slices: dict[str, dict[str, int]]  # category / difficulty / language -> group -> n
    judged_depth: dict[str, float]  # judged chapters per answerable query: mean, min, max
    judgments: int  # chapters graded in the judgments file (beyond the relevant lists)
    unjudged_at_10: float | None  # of the baseline's (or latest) saved run
    unjudged_run: str  # which run that share is of ("" when none)
    unjudged_run_is_baseline: bool
    saturated: list[str]  # queries every tried config ranks first (MRR 1)
    configs_tried: int
    mde: dict[str, float | None]  # split -> MDE of MRR at that split's size
    mde_p75: float | None  # the tune split's MDE with the 75th-percentile spread
    spread_sd: float | None  # median sd of paired MRR differences
    spread_sources: int  # experiments + run pairs the spread came from
    effects_seen: float | None  # median |MRR delta| of logged experiments
    notes: list[str] = field(default_factory=list)
    # Documents (and their front-matter categories) that some answerable query labels.
    coverage: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["saturation"] = len(self.saturated) / self.queries["all"] if self.queries["all"] else 0.0
        return d


def _runs_by_config(runs: Sequence[RunRecord]) -> list[RunRecord]:
    """The newest run of each config (runs given newest first)."""
    seen: dict[str, RunRecord] = {}
    for r in runs:
        seen.setdefault(r.config.hash, r)
    return list(seen.values())


def _mrr(run: RunRecord) -> dict[str, float]:
    mode = run.modes[0]
    return {q: v.get(PRIMARY, 0.0) for q, v in run.per_query(mode).items()}


def golden_health(
    gs: GoldenSet,
    *,
    experiments: Iterable[Mapping[str, Any]] = (),
    runs: Sequence[RunRecord] = (),
    baseline_hash: str = "",
    alpha: float = 0.05,
    power: float = 0.8,
    kb: Any = None,
) -> GoldenHealth:
    """The set's health from its items, its logged experiments and its saved runs."""
    answerable = gs.answerable()
    notes: list[str] = []
    queries = {s: len(gs.answerable(s)) for s in SPLITS}
    queries["all"] = len(answerable)
    queries["unanswerable"] = len(gs.items) - len(answerable)
    slices = {
        by: dict(sorted(Counter(str(getattr(i, by)) or "(none)" for i in answerable).items()))
        for by in ("category", "difficulty", "language")
    }
    depths = [len(i.qrels) for i in answerable] or [0]
    depth = {"mean": sum(depths) / len(depths), "min": min(depths), "max": max(depths)}
    judged = sum(len(i.judged) for i in gs.items)

    mine = [r for r in runs if r.dataset.name == gs.name]
    base = next((r for r in mine if r.config.hash == baseline_hash), None)
    shown = base or (mine[0] if mine else None)
    share = shown.unjudged_share(shown.modes[0], gs, UNJUDGED_K) if shown else None
    if shown is None:
        notes.append("no saved run of this set: run `wikirag eval` for the unjudged share")
    elif base is None:
        notes.append(f"no saved run of the baseline config; unjudged share is of {shown.run_id}")

    tried = _runs_by_config(mine)
    per_run = [_mrr(r) for r in tried]
    ids = [i.id for i in answerable]
    saturated = [q for q in ids if per_run and all(p.get(q, 0.0) >= 1.0 for p in per_run)]

    spreads: list[float] = []
    effects: list[float] = []
    for rec in experiments:
        c = ((rec.get("details") or {}).get("comparisons") or {}).get(PRIMARY)
        if isinstance(c, Mapping):
            sd = spread_from_comparison(c, alpha)
            if sd is not None:
                spreads.append(sd)
                effects.append(abs(float(c.get("delta", 0.0))))
    for a, b in itertools.combinations(per_run, 2):
        sd = spread_of_runs(a, b)
        if sd is not None and sd > 0:
            spreads.append(sd)
    sd_med = percentile(spreads, 50) if spreads else None
    if sd_med is None:
        notes.append("no experiments or pairs of saved runs yet: no spread, so no MDE")
    mdes: dict[str, float | None] = {
        s: (mde(sd_med, n, alpha=alpha, power=power) if sd_med is not None and n else None)
        for s, n in (
            ("tune", queries["tune"]),
            ("holdout", queries["holdout"]),
            ("all", queries["all"]),
        )
    }
    p75 = percentile(spreads, 75) if len(spreads) >= 2 else sd_med
    return GoldenHealth(
        coverage=coverage(gs, kb) if kb is not None else {},
        dataset=gs.name,
        dataset_hash=gs.content_hash,
        queries=queries,
        slices=slices,
        judged_depth=depth,
        judgments=judged,
        unjudged_at_10=share,
        unjudged_run=shown.run_id if shown else "",
        unjudged_run_is_baseline=base is not None,
        saturated=saturated,
        configs_tried=len(tried),
        mde=mdes,
        mde_p75=(
            mde(p75, queries["tune"], alpha=alpha, power=power) if p75 and queries["tune"] else None
        ),
        spread_sd=sd_med,
        spread_sources=len(spreads),
        effects_seen=percentile(effects, 50) if effects else None,
        notes=notes,
    )


def coverage(gs: GoldenSet, kb: Any) -> dict[str, Any]:
    """Which documents and categories the set's labels reach (drafting targets the rest)."""
    labelled = {kb.nodes[n].doc_id for i in gs.answerable() for n in i.qrels if n in kb.nodes}
    cats: dict[str, list[int]] = {}
    for doc in kb.documents:
        c = cats.setdefault(str(doc.frontmatter.get("category") or "(none)"), [0, 0])
        c[0] += doc.doc_id in labelled
        c[1] += 1
    docs = [d.doc_id for d in kb.documents]
    return {
        "documents": len(docs),
        "covered": sum(d in labelled for d in docs),
        "uncovered": [d for d in docs if d not in labelled],
        "by_category": {k: {"covered": a, "documents": b} for k, (a, b) in sorted(cats.items())},
    }


def format_health(h: GoldenHealth) -> str:
    """What `wikirag golden health` prints."""

    def f(x: float | None, spec: str = ".3f") -> str:
        return "n/a" if x is None else format(x, spec)

    q = h.queries
    lines = [
        f"{h.dataset} ({h.dataset_hash}): {q['all']} answerable queries (tune {q['tune']}, "
        f"holdout {q['holdout']}), {q['unanswerable']} unanswerable",
        *(f"  by {by}: " + ", ".join(f"{g} {n}" for g, n in groups.items())
          for by, groups in h.slices.items()),
        f"judged depth: {h.judged_depth['mean']:.2f} chapters per query (min "
        f"{h.judged_depth['min']:.0f}, max {h.judged_depth['max']:.0f}); {h.judgments} graded "
        "in the judgments file",
        f"unjudged in top {UNJUDGED_K}: {f(h.unjudged_at_10, '.1%')}"
        + (f" (run {h.unjudged_run}{'' if h.unjudged_run_is_baseline else ', not the baseline'})"
           if h.unjudged_run else ""),
        f"saturation: {len(h.saturated)} of {q['all']} queries ranked first by every one of "
        f"{h.configs_tried} configs tried",
        f"MDE of MRR (alpha 0.05, power 0.8): tune {f(h.mde['tune'])}, holdout "
        f"{f(h.mde['holdout'])}, all {f(h.mde['all'])} (tune, 75th-percentile spread: "
        f"{f(h.mde_p75)}; sd {f(h.spread_sd)} from {h.spread_sources} comparisons; median "
        f"|effect| seen {f(h.effects_seen)})",
        *(
            [f"coverage: {h.coverage['covered']} of {h.coverage['documents']} documents have a "
             "labelled question; uncovered: " + (", ".join(h.coverage["uncovered"][:8]) or "none")
             + (" ..." if len(h.coverage["uncovered"]) > 8 else "")
             + " (draft questions for their chapters: `wikirag golden draft NODE_ID ...`)"]
            if h.coverage else []
        ),
        *(f"note: {n}" for n in h.notes),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"
