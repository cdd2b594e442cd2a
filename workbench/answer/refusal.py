"""Calibrated evidence judge: is there enough in the KB to answer a question?

Single signals do not separate answerable from unanswerable questions on the bundled wiki
(README "Reliability"). This module combines four per-question signals in a logistic
regression fitted on a golden set (answerable vs ``unanswerable: true`` items):

- ``top_cosine``: the best vector cosine of the question (how close any chapter is);
- ``matched_terms``: key terms of the question found in the best of the top chapters;
- ``missing_terms``: key terms that chapter lacks;
- ``absent_terms``: key terms found nowhere in the KB (an unanswerable question usually
  names something the wiki never mentions: 年会, Kubernetes namespace, Slack bot);
- ``unfamiliar_terms``: key terms whose nearest term of the KB's vocabulary has cosine below
  ``UNFAMILIAR_BELOW`` under the index's embedder (``Engine.vocabulary_similarity``). Unlike
  literal absence it forgives a colloquial word the KB phrases differently (搞 / 配置) and
  still flags a subject the KB never touches (食堂, Terraform). Measured on 208 wiki items
  (docs/benchmarks.md, "Refusal"), it is the one added signal that moved the trade-off:
  cross-validated refusals at <= 5% false refusals went from 29/62 to 38/62.

Counts, not shares: one matched term of two is weaker evidence than three of six.

The model gives p = P(answerable). Two cuts come from the training data: ``lo``, the
highest p refusing at most ``max_false_refusal`` of the answerable items, and ``hi``, the
lowest p with at least ``MIN_UNANSWERABLE_REFUSED`` of the unanswerable items below it.
Without an LLM the chat refuses below ``refuse_below`` (= lo). With one, the band between
the two cuts (``grey_low`` .. ``grey_high``) is the grey zone the LLM judge decides; below it
the chat refuses, above it the evidence is enough.
``wikirag calibrate-refusal`` fits it, measures it by stratified k-fold cross-validation
(thresholds chosen inside each training fold) and writes ``experiments/<kb>/refusal.yaml``
with where it came from. Without that file the chat keeps its coverage rule.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from engine.atomic import atomic_write_text
from engine.errors import ConfigError
from engine.yaml_safe import cap, load_mapping, short
from workbench.answer.terms import key_terms, term_in, term_overlap

FEATURES = ("top_cosine", "matched_terms", "missing_terms", "absent_terms", "unfamiliar_terms")
# Picked among 0.5/0.6/0.7/0.8 by cross-validated refusals on the pooled wiki sets (so the
# pooled numbers are a little optimistic; the held-out set's are not: docs/benchmarks.md).
UNFAMILIAR_BELOW = 0.7
CALIBRATION_FILE = "refusal.yaml"
_SCALARS = ("bias", "refuse_below", "grey_low", "grey_high")  # a calibration's single numbers
# Answerable questions the extractive cut may refuse. Issue 12 item 16 asks <= 0.05 and >= 0.95
# of the unanswerable refused; no cut gets both on the wiki sets (docs/benchmarks.md,
# "Refusal": pooled 5-fold CV refuses ~0.6 of 62 unanswerable items at <= 0.05, and needs
# ~0.3 false refusals for 0.95). The default keeps the answerable side of the target: a wrong
# refusal loses an answer the KB has, and the extractive answer already refuses when no
# sentence shares a term with the question (no unrelated sentence is cited).
MAX_FALSE_REFUSAL = 0.05
MIN_UNANSWERABLE_REFUSED = 0.95  # unanswerable questions refused, at least
L2 = 1.0  # ridge penalty on standardised features: 12 positives cannot carry more
JUDGE_TOP_N = 3  # chapters whose terms count (as the coverage rule)


@dataclass(frozen=True)
class EvidenceFeatures:
    top_cosine: float
    matched_terms: int
    missing_terms: int
    absent_terms: int
    unfamiliar_terms: int = 0

    def vector(self, names: Sequence[str] = FEATURES) -> list[float]:
        return [float(getattr(self, n)) for n in names]


# Lower-cased text of every chapter, per loaded KB: "absent from the KB" is the chat's own
# term test (substring for CJK, whole word otherwise) over it. Keyed by id() with a weak
# reference (a KnowledgeBase is not cheaply hashable), so a reloaded KB gets a fresh text.
_CORPUS: dict[int, tuple[weakref.ref[Any], str]] = {}


def kb_text(kb: Any) -> str:
    got = _CORPUS.get(id(kb))
    if got is not None and got[0]() is kb:
        return got[1]
    text = "\n".join(
        " ".join([*n.breadcrumb, n.title, n.content or ""]) for n in kb.nodes.values()
    ).lower()
    _CORPUS[id(kb)] = (weakref.ref(kb), text)
    return text


def can_probe(retriever: Any) -> bool:
    """Whether the retriever exposes what the features need (the engine does; fakes may not)."""
    return callable(getattr(retriever, "candidates", None)) and hasattr(retriever, "kb")


def evidence_features(question: str, sources: Sequence[Any], retriever: Any) -> EvidenceFeatures:
    """The four signals for ``question`` given the chapters retrieved for it."""
    terms = key_terms(question)
    cand = retriever.candidates(question, pool=1, mode="vector")
    top_cos = float(cand.vector[0][1]) if cand.vector else 0.0
    matched = max((term_overlap(terms, s.text) for s in sources[:JUDGE_TOP_N]), default=0)
    corpus = kb_text(retriever.kb)
    absent = sum(1 for t in terms if not term_in(t, corpus))
    return EvidenceFeatures(
        top_cos, matched, len(terms) - matched, absent, unfamiliar_terms(terms, retriever, absent)
    )


def unfamiliar_terms(terms: Sequence[str], retriever: Any, absent: int) -> int:
    """Key terms nothing in the KB's vocabulary resembles (cosine < ``UNFAMILIAR_BELOW``).
    A retriever without a vocabulary (a fake, an index built before vocabularies) counts the
    literally absent terms instead."""
    probe = getattr(retriever, "vocabulary_similarity", None)
    sims = probe(list(terms)) if callable(probe) and terms else None
    if sims is None:
        return absent
    return sum(1 for s in sims if s < UNFAMILIAR_BELOW)


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))


@dataclass(frozen=True)
class RefusalModel:
    """Logistic regression over standardised features; p = P(answerable)."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weights: tuple[float, ...]
    bias: float
    refuse_below: float  # extractive chat: refuse below this p
    grey_low: float  # with an LLM: refuse below, ask the LLM judge up to grey_high
    grey_high: float
    provenance: Mapping[str, Any] = field(default_factory=dict)

    def probability(self, f: EvidenceFeatures) -> float:
        x = (np.array(f.vector(self.features)) - np.array(self.mean)) / np.array(self.scale)
        return float(_sigmoid(np.array([x @ np.array(self.weights) + self.bias]))[0])

    def verdict(self, p: float, *, with_llm: bool = False) -> str:
        """insufficient / grey / enough for probability ``p``. Without an LLM there is no
        judge for the grey band: it is refused below ``refuse_below`` and answered above."""
        if p >= self.grey_high:
            return "enough"
        if with_llm:
            return "insufficient" if p < self.grey_low else "grey"
        return "insufficient" if p < self.refuse_below else "grey"

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("features", "mean", "scale", "weights"):
            d[k] = list(d[k])
        d["provenance"] = dict(self.provenance)
        return d

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RefusalModel:
        try:
            feats = tuple(str(x) for x in d["features"])
            unknown = [f for f in feats if f not in FEATURES]
            if unknown:
                raise ValueError(f"unknown feature(s) {', '.join(unknown)}")
            vecs = [tuple(float(x) for x in d[k]) for k in ("mean", "scale", "weights")]
            numbers = [*(x for v in vecs for x in v), *(float(d[k]) for k in _SCALARS)]
            if not all(math.isfinite(x) for x in numbers):
                # a NaN weight makes every probability NaN, and NaN < cut refuses everything
                raise ValueError("every number must be finite (no .nan or .inf); refit it")
            if any(len(v) != len(feats) for v in vecs):
                raise ValueError("mean, scale and weights need one value per feature")
            if any(s <= 0 for s in vecs[1]):
                raise ValueError("scale values must be > 0")
            cut, lo, hi = (float(d[k]) for k in _SCALARS[1:])
            if not (0.0 <= lo <= cut <= hi <= 1.0):
                raise ValueError("need 0 <= grey_low <= refuse_below <= grey_high <= 1")
            return cls(
                feats, vecs[0], vecs[1], vecs[2], float(d["bias"]), cut, lo, hi,
                dict(d.get("provenance") or {}),
            )  # fmt: skip
        except (KeyError, TypeError) as exc:
            raise ValueError(f"refusal calibration is missing or malformed: {short(exc)}") from exc

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        header = "# written by `wikirag calibrate-refusal`; refit rather than edit by hand\n"
        body = yaml.safe_dump(self.to_dict(), allow_unicode=True, sort_keys=False)
        atomic_write_text(path, header + body)


def load_model(path: Path) -> RefusalModel:
    """The calibration at ``path``; a ConfigError (one line naming the file) when it is not
    valid YAML, uses aliases, or holds a malformed or non-finite model."""
    data = load_mapping(path.read_text(encoding="utf-8"), f"refusal calibration {path}")
    try:
        return RefusalModel.from_dict(data)
    except ValueError as exc:
        raise ConfigError(cap(f"{path}: {exc}")) from exc


def embedder_of(cfg: Any) -> str:
    """The embedder a calibration's cosines came from (cosine scales differ per model)."""
    emb = cfg.embedding
    return f"{emb.provider}/{emb.model}/{emb.dims}"


def model_for(retriever: Any, experiments_root: Path = Path("experiments")) -> RefusalModel | None:
    """The KB's calibration (``experiments/<kb>/refusal.yaml``, the workspace convention),
    or None: then the chat keeps its coverage rule. None too when the retriever embeds with
    another model than the calibration was fitted with. A broken file is an error."""
    kb = getattr(retriever, "kb", None)
    root = getattr(kb, "root", None)
    if root is None:
        return None
    path = experiments_root / Path(root).resolve().name / CALIBRATION_FILE
    if not path.is_file():
        return None
    model = load_model(path)
    fitted_with = model.provenance.get("embedder")
    cfg = getattr(retriever, "config", None)
    if fitted_with and cfg is not None and embedder_of(cfg) != fitted_with:
        return None
    return model


# --- fitting ---------------------------------------------------------------------------


def _fit_weights(x: np.ndarray, y: np.ndarray, l2: float = L2) -> tuple[np.ndarray, float]:
    """Class-balanced L2 logistic regression by Newton's method (y = 1: answerable)."""
    n, d = x.shape
    xb = np.hstack([x, np.ones((n, 1))])
    pos = max(1.0, float(y.sum()))
    neg = max(1.0, float(n - y.sum()))
    sw = np.where(y == 1, n / (2 * pos), n / (2 * neg))
    reg = np.diag([*([l2] * d), 0.0])
    w = np.zeros(d + 1)
    for _ in range(100):
        p = _sigmoid(xb @ w)
        grad = xb.T @ (sw * (p - y)) + reg @ w
        hess = (xb.T * (sw * p * (1 - p))) @ xb + reg
        step = np.linalg.solve(hess, grad)
        w -= step
        if float(np.abs(step).max()) < 1e-10:
            break
    return w[:-1], float(w[-1])


def choose_thresholds(
    p: np.ndarray,
    answerable: np.ndarray,
    max_false_refusal: float = MAX_FALSE_REFUSAL,
    min_unanswerable_refused: float = MIN_UNANSWERABLE_REFUSED,
) -> tuple[float, float]:
    """(lo, hi) on training probabilities (see the module docstring).

    lo: the highest cut refusing at most ``max_false_refusal`` of the answerable (a midpoint
    between neighbouring probabilities, so it generalises a little). hi: the lowest cut
    under which at least ``min_unanswerable_refused`` of the unanswerable fall.
    """
    ans = np.sort(p[answerable])
    una = np.sort(p[~answerable])
    allowed = math.floor(max_false_refusal * len(ans) + 1e-9)
    lo = (
        float((ans[allowed - 1] + ans[allowed]) / 2)
        if 0 < allowed < len(ans)
        else (float(ans[0]) if len(ans) else 0.5)
    )
    need = math.ceil(min_unanswerable_refused * len(una) - 1e-9)
    if need <= 0 or not len(una):
        hi = lo
    elif need >= len(una):
        hi = float(una[-1]) + 1e-6
    else:
        hi = float((una[need - 1] + una[need]) / 2)
    return min(max(lo, 0.0), 1.0), min(max(hi, 0.0), 1.0)


def fit(
    feats: Sequence[EvidenceFeatures],
    answerable: Sequence[bool],
    *,
    names: Sequence[str] = FEATURES,
    max_false_refusal: float = MAX_FALSE_REFUSAL,
    provenance: Mapping[str, Any] | None = None,
) -> RefusalModel:
    y = np.array(answerable, dtype=float)
    if y.sum() < 2 or (len(y) - y.sum()) < 2:
        raise ValueError("calibration needs at least 2 answerable and 2 unanswerable items")
    x = np.array([f.vector(names) for f in feats], dtype=float)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale < 1e-9] = 1.0
    w, b = _fit_weights((x - mean) / scale, y)
    p = _sigmoid(((x - mean) / scale) @ w + b)
    lo, hi = choose_thresholds(p, y.astype(bool), max_false_refusal)
    return RefusalModel(
        tuple(names),
        tuple(float(v) for v in mean),
        tuple(float(v) for v in scale),
        tuple(float(v) for v in w),
        b,
        refuse_below=lo,
        grey_low=min(lo, hi),
        grey_high=max(lo, hi),
        provenance=dict(provenance or {}),
    )


def folds(answerable: Sequence[bool], k: int) -> list[int]:
    """Stratified fold of each item: the i-th answerable item goes to fold i mod k, and the
    unanswerable likewise (input order, so the same golden set gives the same folds)."""
    seen = {True: 0, False: 0}
    out = []
    for a in answerable:
        out.append(seen[bool(a)] % k)
        seen[bool(a)] += 1
    return out


def rate_summary(refused: Sequence[bool], answerable: Sequence[bool]) -> dict[str, Any]:
    """Both refusal rates with their counts (what `eval --answers` prints, as a mapping)."""
    un = [r for r, a in zip(refused, answerable, strict=True) if not a]
    an = [r for r, a in zip(refused, answerable, strict=True) if a]
    return {
        "unanswerable_refused": f"{sum(un)}/{len(un)}",
        "unanswerable_refused_rate": round(sum(un) / len(un), 3) if un else None,
        "answerable_wrongly_refused": f"{sum(an)}/{len(an)}",
        "answerable_wrongly_refused_rate": round(sum(an) / len(an), 3) if an else None,
    }


def refused_by(model: RefusalModel, feats: Sequence[EvidenceFeatures]) -> list[bool]:
    """What the extractive chat's judge does with each item: refuse (``insufficient``)?"""
    return [model.verdict(model.probability(f)) == "insufficient" for f in feats]


@dataclass(frozen=True)
class CrossValidation:
    k: int
    unanswerable_refused: int
    n_unanswerable: int
    answerable_refused: int
    n_answerable: int
    refused: tuple[bool, ...]  # per item, in input order

    @property
    def unanswerable_rate(self) -> float:
        return self.unanswerable_refused / self.n_unanswerable if self.n_unanswerable else 0.0

    @property
    def false_refusal_rate(self) -> float:
        return self.answerable_refused / self.n_answerable if self.n_answerable else 0.0

    def summary(self) -> dict[str, Any]:
        return {
            "folds": self.k,
            "unanswerable_refused": f"{self.unanswerable_refused}/{self.n_unanswerable}",
            "unanswerable_refused_rate": round(self.unanswerable_rate, 3),
            "answerable_wrongly_refused": f"{self.answerable_refused}/{self.n_answerable}",
            "answerable_wrongly_refused_rate": round(self.false_refusal_rate, 3),
        }


def cross_validate(
    feats: Sequence[EvidenceFeatures],
    answerable: Sequence[bool],
    *,
    k: int = 5,
    names: Sequence[str] = FEATURES,
    max_false_refusal: float = MAX_FALSE_REFUSAL,
) -> CrossValidation:
    """Refusal rates of models that never saw the item they judge (k-fold; thresholds
    chosen on the training folds). Refused = verdict ``insufficient`` (the extractive chat)."""
    n_un = sum(1 for a in answerable if not a)
    k = max(2, min(k, n_un, len(answerable) - n_un))
    fold = folds(answerable, k)
    refused = [False] * len(feats)
    for f in range(k):
        train = [i for i in range(len(feats)) if fold[i] != f]
        if sum(1 for i in train if not answerable[i]) < 2:
            raise ValueError(
                f"{k}-fold cross-validation leaves a training fold with fewer than 2 "
                "unanswerable items; add unanswerable items or use fewer folds"
            )
        model = fit(
            [feats[i] for i in train],
            [answerable[i] for i in train],
            names=names,
            max_false_refusal=max_false_refusal,
        )
        for i in range(len(feats)):
            if fold[i] == f:
                refused[i] = model.verdict(model.probability(feats[i])) == "insufficient"
    un = sum(r for r, a in zip(refused, answerable, strict=True) if not a)
    an = sum(r for r, a in zip(refused, answerable, strict=True) if a)
    return CrossValidation(k, un, n_un, an, len(answerable) - n_un, tuple(refused))
