"""How far raters agree: Cohen's kappa for two (weighted for grades), Fleiss' for more.

Kappa is the agreement beyond chance, ``(p_o - p_e) / (1 - p_e)``: 1 is perfect, 0 is
what raters guessing by their own grade frequencies would reach. For graded labels a
near miss (2 vs 3) should cost less than a far one (0 vs 3), so two raters get Cohen's
weighted kappa (Cohen 1968) with linear weights ``|i - j| / (K - 1)`` by default, the
same number as scikit-learn's ``cohen_kappa_score(a, b, labels=[0, 1, 2, 3],
weights="linear")``. Three or more raters get Fleiss' kappa (Fleiss 1971), which has no
weighting, over the pairs at least two of them graded. Only grades count: "judge later"
and "can't tell" are not ratings.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench.eval import judgments as J

SCALE: tuple[int, ...] = tuple(sorted(J.GRADES))


@dataclass(frozen=True)
class Disagreement:
    query_id: str
    node_id: str
    grades: dict[str, int]  # rater -> grade

    @property
    def spread(self) -> int:
        return max(self.grades.values()) - min(self.grades.values())


@dataclass(frozen=True)
class Agreement:
    raters: tuple[str, ...]
    method: str  # "cohen-linear" | "cohen-quadratic" | "cohen" | "fleiss" | "none"
    pairs: int  # (query, chapter) pairs that at least two raters graded
    kappa: float | None  # None when undefined (fewer than two raters or one grade only)
    per_query: dict[str, float | None] = field(default_factory=dict)
    disagreements: tuple[Disagreement, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "raters": list(self.raters),
            "method": self.method,
            "pairs": self.pairs,
            "kappa": self.kappa,
            "per_query": self.per_query,
            "disagreements": [
                {"query_id": d.query_id, "node_id": d.node_id, "grades": d.grades}
                for d in self.disagreements
            ],
        }


def cohen_kappa(
    a: Sequence[int], b: Sequence[int], *, labels: Sequence[int] = SCALE, weights: str | None = None
) -> float | None:
    """Cohen's kappa of two raters' labels for the same items (None when undefined)."""
    if len(a) != len(b):
        raise ValueError("both raters need a label for every item")
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic'; got {weights!r}")
    if not a:
        return None
    index = {g: n for n, g in enumerate(labels)}
    k, n = len(labels), len(a)
    observed = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        observed[index[x]][index[y]] += 1 / n
    row = [sum(observed[i]) for i in range(k)]
    col = [sum(observed[i][j] for i in range(k)) for j in range(k)]

    def w(i: int, j: int) -> float:  # disagreement weight: 0 on the diagonal
        if weights is None:
            return float(i != j)
        d = abs(i - j)
        return float(d if weights == "linear" else d * d)

    po = sum(w(i, j) * observed[i][j] for i in range(k) for j in range(k))
    pe = sum(w(i, j) * row[i] * col[j] for i in range(k) for j in range(k))
    return None if pe == 0 else 1 - po / pe


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float | None:
    """Fleiss' kappa from a table: one row per item, the number of raters per category.

    Rows may have different totals (a pair not every rater saw); rows with fewer than two
    ratings are skipped, as they carry no agreement.
    """
    rows = [r for r in counts if sum(r) >= 2]
    if not rows:
        return None
    total = sum(sum(r) for r in rows)
    p_bar = sum((sum(c * c for c in r) - sum(r)) / (sum(r) * (sum(r) - 1)) for r in rows) / len(
        rows
    )
    shares = [sum(r[j] for r in rows) / total for j in range(len(rows[0]))]
    pe = sum(p * p for p in shares)
    return None if pe == 1 else (p_bar - pe) / (1 - pe)


def _graded(judgments: Iterable[J.Judgment], raters: Sequence[str] | None) -> dict:
    out: dict[tuple[str, str], dict[str, int]] = {}
    for pair, by in J.latest(judgments).items():
        grades = {r: int(j.grade) for r, j in by.items() if j.graded}
        if raters is not None:
            grades = {r: g for r, g in grades.items() if r in raters}
        if len(grades) >= 2:
            out[pair] = grades
    return out


def _kappa(
    pairs: dict[tuple[str, str], dict[str, int]], raters: Sequence[str], weights: str | None
):
    if len(raters) == 2:
        a, b = raters
        both = [g for g in pairs.values() if a in g and b in g]
        return cohen_kappa([g[a] for g in both], [g[b] for g in both], weights=weights)
    table = [[sum(1 for v in g.values() if v == c) for c in SCALE] for g in pairs.values()]
    return fleiss_kappa(table)


def agreement(
    judgments: Iterable[J.Judgment],
    *,
    raters: Sequence[str] | None = None,
    weights: str | None = "linear",
) -> Agreement:
    """Kappa overall and per query, and every pair the raters graded differently."""
    pairs = _graded(judgments, raters)
    who = tuple(sorted({r for g in pairs.values() for r in g}))
    if len(who) < 2:
        return Agreement(who, "none", 0, None)
    method = ("cohen" + (f"-{weights}" if weights else "")) if len(who) == 2 else "fleiss"
    per_query = {
        qid: _kappa({p: g for p, g in pairs.items() if p[0] == qid}, who, weights)
        for qid in sorted({q for q, _ in pairs})
    }
    dis = sorted(
        (Disagreement(q, n, dict(sorted(g.items()))) for (q, n), g in pairs.items()
         if len(set(g.values())) > 1),
        key=lambda d: (-d.spread, d.query_id, d.node_id),
    )  # fmt: skip
    return Agreement(who, method, len(pairs), _kappa(pairs, who, weights), per_query, tuple(dis))
