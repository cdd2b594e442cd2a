"""Retrieval metrics as values in one registry (the ir_measures style).

``parse_measure("ndcg@10")`` returns a :class:`Measure`; ``str()`` prints it back as
``"ndcg@10"``. Every measure is computed by one function of this module, and the
numbers agree with trec_eval (checked against trec_eval's own expected outputs and
against pytrec_eval on random runs, see tests/workbench/test_metrics.py).

Conventions (the same for every measure):

- A document is relevant when its grade in the qrels is ``>= relevance_level``
  (default 1, so any grade > 0). Unjudged documents have grade 0.
- A ranked list is read top first. A document that appears twice counts once, at its
  first position (later copies are dropped before scoring, so they take no rank).
- A query with no results scores 0 on every measure, never NaN.
- ``evaluate_query`` on a query with no relevant document returns 0 for every measure.
  ``evaluate_run`` leaves such a query out of the means by default (it scores 0 under
  every run, so it cannot tell runs apart and only dilutes the means; a golden set's
  ``unanswerable`` queries are of this kind) and lists it in ``RunEvaluation.skipped``.
  trec_eval itself *does* average them in as 0 (its ``out.comment.test`` reports
  num_q = 31 with one query judged all non-relevant); pass
  ``count_queries_without_relevant=True`` to get trec_eval's means.
- A query of the qrels that is missing from the run counts as an empty ranking (score
  0), like ``trec_eval -c``; a query of the run that is not in the qrels is skipped.
- Scores are turned into a ranking by :func:`rank_by_score`: score descending, ties
  broken by document id *descending* (trec_eval sorts this way and ignores the rank
  column of a run file).

Measures (K is a positive integer cut-off; trec_eval's name in brackets):

- ``precision@K`` [P_K]: relevant documents in the top K divided by K (not by the
  number retrieved: a list shorter than K is penalised, as in trec_eval).
- ``recall@K`` [recall_K]: relevant documents in the top K / all relevant documents.
  ``recall`` without K uses the whole list.
- ``hit@K`` [success_K]: 1 if any relevant document is in the top K, else 0.
- ``mrr`` [recip_rank]: 1 / rank of the first relevant document (0 if none);
  ``mrr@K`` is 0 when the first relevant document is below rank K.
- ``ndcg@K`` [ndcg_cut_K]: DCG@K / IDCG@K with gain = grade (negative grades count 0),
  discount ``log2(rank + 1)``, and the ideal DCG from the judged grades sorted
  descending, truncated at K (Järvelin & Kekäläinen 2002; trec_eval's ``ndcg_cut``).
  With binary qrels this is binary NDCG. ``ndcg`` without K uses the whole list
  [ndcg]. Gains use the raw grade whatever ``relevance_level`` is, like trec_eval.
- ``map`` [map]: average precision: the sum of precision@rank over the ranks of the
  relevant retrieved documents, divided by the number of relevant documents.
  ``map@K`` [map_cut_K] sums over ranks <= K only (same divisor, as trec_eval).
- ``rprec`` [Rprec]: precision at rank R, R = the number of relevant documents.
- ``bpref`` [bpref]: Buckley & Voorhees 2004, as trec_eval computes it:
  ``1/R * Σ_{relevant retrieved r} (1 - min(n_r, R) / min(R, N))`` where n_r is the
  number of judged non-relevant documents ranked above r and N the number of judged
  non-relevant documents (a relevant document with n_r = 0 adds 1).
- ``hrecall@K``: hierarchical recall; see :func:`hierarchical_credit`. Without a
  hierarchy it equals ``recall@K``.
- ``hndcg@K``: NDCG whose gains follow the heading tree (a child, parent or sibling of a
  relevant chapter earns partial gain); see :func:`tree_gains`. Without a hierarchy it
  equals ``ndcg@K``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from workbench.eval.hierarchy import Hierarchy, as_parent_fn, hierarchical_credit, tree_gains

DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20)


@dataclass(frozen=True)
class Measure:
    """One measure with an optional cut-off; ``str(m)`` parses back to ``m``."""

    name: str
    k: int | None = None

    def __post_init__(self) -> None:
        spec = _REGISTRY.get(self.name)
        if spec is None:
            raise ValueError(
                f"unknown measure {self.name!r}; known measures: {', '.join(known_measures())}"
            )
        if self.k is not None and (
            isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1
        ):
            raise ValueError(
                f"{self.name}: the cut-off must be a positive integer, got {self.k!r}; e.g. {self.name}@10"
            )
        if self.k is None and spec.cutoff == "required":
            raise ValueError(f"{self.name} needs a cut-off, e.g. {self.name}@10")
        if self.k is not None and spec.cutoff == "none":
            raise ValueError(f"{self.name} takes no cut-off; write {self.name}")

    def __str__(self) -> str:
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def description(self) -> str:
        return _REGISTRY[self.name].description

    @property
    def trec_name(self) -> str | None:
        """trec_eval's name for this measure (``P_5``, ``ndcg_cut_10``), or None if it has none."""
        spec = _REGISTRY[self.name]
        if self.k is None:
            return spec.trec_full
        return f"{spec.trec_cut}_{self.k}" if spec.trec_cut else None


@dataclass(frozen=True)
class _Query:
    """One query prepared for scoring: its ranking and what the qrels say about it."""

    ranked: tuple[str, ...]
    grades: tuple[int, ...]  # grade of each ranked document (0 if unjudged)
    relevant: frozenset[str]
    relevant_grades: Mapping[str, int]  # grade of each relevant document, ranked or not
    judged: frozenset[str]
    ideal: tuple[int, ...]  # positive judged grades, descending
    num_nonrel_judged: int
    relevance_level: int
    hierarchy: Callable[[str], str | None] | None

    def is_rel(self, i: int) -> bool:
        return self.grades[i] >= self.relevance_level

    def depth(self, k: int | None) -> int:
        return len(self.ranked) if k is None else min(k, len(self.ranked))


def _precision(q: _Query, k: int | None) -> float:
    if k is None:
        raise ValueError("precision needs a cut-off, e.g. precision@10")
    return sum(1 for i in range(q.depth(k)) if q.is_rel(i)) / k


def _recall(q: _Query, k: int | None) -> float:
    if not q.relevant:
        return 0.0
    return sum(1 for i in range(q.depth(k)) if q.is_rel(i)) / len(q.relevant)


def _hit(q: _Query, k: int | None) -> float:
    return 1.0 if any(q.is_rel(i) for i in range(q.depth(k))) else 0.0


def _mrr(q: _Query, k: int | None) -> float:
    for i in range(q.depth(k)):
        if q.is_rel(i):
            return 1.0 / (i + 1)
    return 0.0


def _dcg(gains: Iterable[int]) -> float:
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g > 0)


def _ndcg(q: _Query, k: int | None) -> float:
    n = q.depth(k)
    ideal = _dcg(q.ideal if k is None else q.ideal[:k])
    if ideal <= 0.0:
        return 0.0
    return _dcg(q.grades[:n]) / ideal


def _map(q: _Query, k: int | None) -> float:
    if not q.relevant:
        return 0.0
    found = 0
    total = 0.0
    for i in range(q.depth(k)):
        if q.is_rel(i):
            found += 1
            total += found / (i + 1)
    return total / len(q.relevant)


def _rprec(q: _Query, k: int | None) -> float:
    r = len(q.relevant)
    if r == 0:
        return 0.0
    return sum(1 for i in range(min(r, len(q.ranked))) if q.is_rel(i)) / r


def _bpref(q: _Query, k: int | None) -> float:
    r = len(q.relevant)
    if r == 0:
        return 0.0
    nonrel_above = 0
    total = 0.0
    denom = min(r, q.num_nonrel_judged)
    for i, doc in enumerate(q.ranked):
        if q.is_rel(i):
            total += 1.0 - min(nonrel_above, r) / denom if nonrel_above > 0 else 1.0
        elif doc in q.judged:
            nonrel_above += 1
    return total / r


def _hrecall(q: _Query, k: int | None) -> float:
    if not q.relevant:
        return 0.0
    top = q.ranked[: q.depth(k)]
    return sum(hierarchical_credit(rel, top, q.hierarchy) for rel in q.relevant) / len(q.relevant)


def _hndcg(q: _Query, k: int | None) -> float:
    """NDCG with partial gains that follow the heading tree (see :func:`tree_gains`)."""
    ideal = _dcg(q.ideal if k is None else q.ideal[:k])
    if ideal <= 0.0:
        return 0.0
    top = q.ranked[: q.depth(k)]
    # The qrels' grade, also for a relevant chapter the ranking missed: its neighbours'
    # partial credit scales with it, as the ideal DCG does.
    rel_grades = {r: max(g, 1) for r, g in q.relevant_grades.items()}
    gains = tree_gains(top, rel_grades, q.hierarchy)
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g > 0) / ideal


@dataclass(frozen=True)
class _Spec:
    fn: Callable[[_Query, int | None], float]
    cutoff: str  # "required" | "optional" | "none"
    description: str
    trec_full: str | None  # trec_eval name without a cut-off
    trec_cut: str | None  # trec_eval prefix with a cut-off (name_K)


_REGISTRY: dict[str, _Spec] = {
    "precision": _Spec(_precision, "required", "relevant in top K / K", None, "P"),
    "recall": _Spec(_recall, "optional", "relevant in top K / all relevant", None, "recall"),
    "hit": _Spec(
        _hit, "required", "1 if a relevant document is in the top K (hit rate)", None, "success"
    ),
    "mrr": _Spec(_mrr, "optional", "1 / rank of the first relevant document", "recip_rank", None),
    "ndcg": _Spec(
        _ndcg, "optional", "normalised DCG, graded gains, log2 discount", "ndcg", "ndcg_cut"
    ),
    "map": _Spec(_map, "optional", "average precision", "map", "map_cut"),
    "rprec": _Spec(_rprec, "none", "precision at R = number of relevant", "Rprec", None),
    "bpref": _Spec(_bpref, "none", "binary preference (judged non-relevant only)", "bpref", None),
    "hrecall": _Spec(
        _hrecall,
        "required",
        "hierarchical recall: exact 1, descendant 0.5, ancestor 0.3",
        None,
        None,
    ),
    "hndcg": _Spec(
        _hndcg,
        "required",
        "NDCG with tree gains: exact grade, descendant 0.5, ancestor 0.3, sibling 0.2",
        None,
        None,
    ),
}

# Other spellings accepted by parse_measure (ir_measures and trec_eval names); they
# parse to the canonical measure, so str() prints the canonical name.
_ALIASES: dict[str, str] = {
    "p": "precision",
    "r": "recall",
    "success": "hit",
    "hit_rate": "hit",
    "hitrate": "hit",
    "rr": "mrr",
    "recip_rank": "mrr",
    "ap": "map",
    "ndcg_cut": "ndcg",
}

_MEASURE_RE = re.compile(r"^\s*([A-Za-z_]+?)\s*(?:@\s*(\d+))?\s*$")
_TREC_RE = re.compile(r"^(P|recall|success|ndcg_cut|map_cut)_(\d+)$")


def known_measures() -> list[str]:
    """Canonical measure names, with ``@K`` where a cut-off is required or allowed."""
    out = []
    for name, spec in _REGISTRY.items():
        out.append(
            {"required": f"{name}@K", "optional": f"{name}, {name}@K", "none": name}[spec.cutoff]
        )
    return out


def parse_measure(text: str | Measure) -> Measure:
    """Parse ``"ndcg@10"``, ``"mrr"``, ``"P@5"`` ... into a :class:`Measure`."""
    if isinstance(text, Measure):
        return text
    m = _MEASURE_RE.match(str(text))
    if not m:
        raise ValueError(
            f"cannot parse measure {text!r}; write name or name@K, known: {', '.join(known_measures())}"
        )
    name = m.group(1).lower()
    name = _ALIASES.get(name, name)
    if name not in _REGISTRY:
        raise ValueError(f"unknown measure {text!r}; known measures: {', '.join(known_measures())}")
    return Measure(name, int(m.group(2)) if m.group(2) else None)


def from_trec_name(name: str) -> Measure:
    """trec_eval's name (``P_5``, ``recall_10``, ``ndcg_cut_20``, ``recip_rank``...) -> Measure."""
    m = _TREC_RE.match(name)
    if m:
        prefix = {
            "P": "precision",
            "recall": "recall",
            "success": "hit",
            "ndcg_cut": "ndcg",
            "map_cut": "map",
        }
        return Measure(prefix[m.group(1)], int(m.group(2)))
    for canon, spec in _REGISTRY.items():
        if spec.trec_full == name:
            return Measure(canon)
    raise ValueError(f"no measure here computes trec_eval's {name!r}")


# The measures every evaluation computes at each K, in the order runs record them.
DEFAULT_FAMILIES = ("recall", "precision", "hit", "ndcg", "hrecall", "hndcg", "mrr")


def default_measures(ks: Sequence[int] | None = None) -> tuple[Measure, ...]:
    """The standard set: every ``DEFAULT_FAMILIES`` measure at each K, then mrr and map."""
    ks = DEFAULT_KS if ks is None else tuple(ks)
    out = [Measure(name, k) for name in DEFAULT_FAMILIES for k in ks]
    return (*out, Measure("mrr"), Measure("map"))


def dedupe(ranked: Iterable[str]) -> list[str]:
    """The ranking with repeats removed, each document kept at its first position."""
    seen: set[str] = set()
    out = []
    for doc in ranked:
        if doc not in seen:
            seen.add(doc)
            out.append(doc)
    return out


def rank_by_score(scores: Mapping[str, float]) -> list[str]:
    """Document ids by score descending, ties broken by document id descending.

    This is trec_eval's order (and pytrec_eval's): it sorts a run by score and then by
    docno in reverse string order, ignoring the rank column. Python compares str by
    code point, which is the byte order of their UTF-8 encodings, as trec_eval's strcmp.
    """
    for doc, s in scores.items():
        if isinstance(s, float) and math.isnan(s):
            raise ValueError(f"score of {doc!r} is NaN; a ranking needs comparable scores")
    return [
        doc for doc, _ in sorted(scores.items(), key=lambda item: (item[1], item[0]), reverse=True)
    ]


def _prepare(
    ranked_ids: Sequence[str],
    qrels: Mapping[str, int],
    hierarchy: Hierarchy | None,
    relevance_level: int,
) -> _Query:
    ranked = tuple(dedupe(ranked_ids))
    return _Query(
        ranked=ranked,
        grades=tuple(int(qrels.get(d, 0)) for d in ranked),
        relevant=frozenset(d for d, g in qrels.items() if g >= relevance_level),
        relevant_grades={d: int(g) for d, g in qrels.items() if g >= relevance_level},
        judged=frozenset(qrels),
        ideal=tuple(sorted((int(g) for g in qrels.values() if g > 0), reverse=True)),
        num_nonrel_judged=sum(1 for g in qrels.values() if g < relevance_level),
        relevance_level=relevance_level,
        hierarchy=as_parent_fn(hierarchy),
    )


def _measures(measures: Iterable[Measure | str] | None) -> tuple[Measure, ...]:
    if measures is None:
        return default_measures()
    if isinstance(measures, (str, Measure)):
        measures = [measures]
    return tuple(dict.fromkeys(parse_measure(m) for m in measures))


def evaluate_query(
    ranked_ids: Sequence[str],
    qrels: Mapping[str, int],
    measures: Iterable[Measure | str] | None = None,
    hierarchy: Hierarchy | None = None,
    *,
    relevance_level: int = 1,
) -> dict[str, float]:
    """Score one ranking against one query's qrels: ``{str(measure): value}``.

    ``measures`` defaults to :func:`default_measures`. See the module docstring for
    the conventions (duplicates, empty rankings, queries with nothing relevant).
    """
    if isinstance(ranked_ids, str):
        raise TypeError("ranked_ids must be a sequence of document ids, not one string")
    q = _prepare(ranked_ids, qrels, hierarchy, relevance_level)
    return {str(m): float(_REGISTRY[m.name].fn(q, m.k)) for m in _measures(measures)}


@dataclass(frozen=True)
class RunEvaluation:
    """Per-query values and their means over the evaluated queries."""

    per_query: dict[str, dict[str, float]]
    means: dict[str, float]
    skipped: tuple[str, ...] = field(
        default=()
    )  # queries left out: nothing relevant, or not judged

    @property
    def num_queries(self) -> int:
        return len(self.per_query)


def evaluate_run(
    run: Mapping[str, Sequence[str]],
    qrels: Mapping[str, Mapping[str, int]],
    measures: Iterable[Measure | str] | None = None,
    hierarchy: Hierarchy | None = None,
    *,
    relevance_level: int = 1,
    count_queries_without_relevant: bool = False,
) -> RunEvaluation:
    """Score every judged query of a run; means over queries with a relevant document.

    A judged query missing from ``run`` scores 0 (like ``trec_eval -c``). Queries with no
    relevant document are listed in ``skipped`` and left out of the means, unless
    ``count_queries_without_relevant`` (trec_eval's convention: they count as 0). Run
    queries absent from the qrels are listed in ``skipped`` too.
    """
    ms = _measures(measures)
    per_query: dict[str, dict[str, float]] = {}
    skipped: list[str] = []
    for qid, judged in qrels.items():
        if not count_queries_without_relevant and not any(
            g >= relevance_level for g in judged.values()
        ):
            skipped.append(qid)
            continue
        per_query[qid] = evaluate_query(
            run.get(qid, ()), judged, ms, hierarchy, relevance_level=relevance_level
        )
    skipped.extend(qid for qid in run if qid not in qrels)
    return RunEvaluation(
        per_query=per_query, means=mean_scores(per_query, ms), skipped=tuple(skipped)
    )


def mean_scores(
    per_query: Mapping[str, Mapping[str, float]], measures: Iterable[Measure | str] | None = None
) -> dict[str, float]:
    """Arithmetic mean of each measure over the queries (0.0 when there are none)."""
    if measures is None:
        names: list[str] = list(dict.fromkeys(m for row in per_query.values() for m in row))
    else:
        names = [str(m) for m in _measures(measures)]
    n = len(per_query)
    return {m: (math.fsum(row[m] for row in per_query.values()) / n if n else 0.0) for m in names}


def aggregate(
    per_query: Mapping[str, Mapping[str, float]],
    groups: Mapping[str, str],
    *,
    missing: str | None = "(none)",
) -> dict[str, dict[str, float]]:
    """Mean of each measure per group (difficulty, category...): ``{group: {measure: mean}}``.

    Queries without a group go to the group named ``missing`` (or are left out when
    ``missing`` is None). Groups are returned sorted by name.
    """
    buckets: dict[str, dict[str, Mapping[str, float]]] = {}
    for qid, row in per_query.items():
        group = groups.get(qid, missing)
        if group is None:
            continue
        buckets.setdefault(str(group), {})[qid] = row
    return {g: mean_scores(buckets[g]) for g in sorted(buckets)}


def worst_queries(
    per_query: Mapping[str, Mapping[str, float]], measure: Measure | str, n: int = 10
) -> list[tuple[str, float]]:
    """The ``n`` queries with the lowest value of ``measure``, lowest first (ties by query id)."""
    if n < 0:
        raise ValueError("n must be >= 0")
    key = str(parse_measure(measure))
    rows = [(qid, row[key]) for qid, row in per_query.items() if key in row]
    if len(rows) < len(per_query):
        raise ValueError(f"{key} was not computed for every query; evaluate with it first")
    return sorted(rows, key=lambda item: (item[1], item[0]))[:n]
