"""Answer quality of the chat against a golden set: key phrases, citations, refusals, latency.

Per item (``score_answer``), each a float; a key is absent when it does not apply:

- ``answer_contains``: share of the item's ``answer_contains`` phrases found in the answer
  (case-insensitive, Unicode-normalised; whitespace ignored for phrases with CJK, since
  models put spaces between Chinese and Latin words at will). Absent without phrases.
- ``citation_precision`` / ``citation_recall``: strict, on distinct cited node ids against
  the item's ``relevant`` ids. No citations -> precision 0 (an uncited answer earns no
  credit). Absent for unanswerable items.
- ``citation_precision_hier`` / ``citation_recall_hier``: the same with partial credit along
  the heading tree, matching the retrieval metric's hierarchical recall (eval/hierarchy.py): citing
  a child of a relevant chapter counts 0.5, its parent 0.3. A citation of a neighbour is
  often a fair answer source, but it is not what the golden set names, so the strict
  numbers stay the headline and the hierarchical ones sit beside them.
- ``refusal_correct``: 1 when an unanswerable item was refused or an answerable one was
  not; ``refused`` and ``unanswerable`` (0/1) are kept for the aggregate rates.
- ``latency_ms``: the answer's wall time.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from engine.cjk import IDEOGRAPH_RANGES
from workbench.answer.chat_answer import ChatAnswer
from workbench.eval.golden import MAX_RELEVANT, MIN_RELEVANT
from workbench.eval.percentiles import percentile

CHILD_CREDIT = 0.5
PARENT_CREDIT = 0.3

# CJK ideographs plus kana and Hangul: phrases in these scripts match with whitespace ignored.
_CJK = re.compile(f"[{IDEOGRAPH_RANGES}\u3040-\u30ff\uac00-\ud7af]")
_WS = re.compile(r"\s+")

ParentOf = Callable[[str], str | None]


def _norm(text: str) -> str:
    return _WS.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def phrase_present(phrase: str, text: str) -> bool:
    """Case-insensitive, NFKC-normalised containment; whitespace ignored for CJK phrases."""
    p, t = _norm(phrase), _norm(text)
    if not p:
        return True
    if _CJK.search(p):
        return p.replace(" ", "") in t.replace(" ", "")
    return p in t


def parent_from_id(node_id: str) -> str | None:
    """The parent's id by the node-id scheme of engine.tree: ``doc#a/b`` -> ``doc#a`` -> ``doc``."""
    doc, sep, path = node_id.partition("#")
    if not sep:
        return None
    head, slash, _ = path.rpartition("/")
    return f"{doc}#{head}" if slash else doc


def _credit(cited: str, relevant: str, parent_of: ParentOf) -> float:
    if cited == relevant:
        return 1.0
    if parent_of(cited) == relevant:
        return CHILD_CREDIT  # the citation is a child of the relevant chapter
    if parent_of(relevant) == cited:
        return PARENT_CREDIT  # the citation is the relevant chapter's parent
    return 0.0


def citation_scores(
    cited: Sequence[str], relevant: Sequence[str], parent_of: ParentOf = parent_from_id
) -> dict[str, float]:
    """Strict and hierarchical citation precision/recall over distinct node ids."""
    c = list(dict.fromkeys(cited))
    r = list(dict.fromkeys(relevant))
    if not r:
        raise ValueError(
            f"relevant is empty; an answerable golden item needs {MIN_RELEVANT}-{MAX_RELEVANT} "
            "relevant ids"
        )
    hits = len(set(c) & set(r))
    best_for_cited = [max(_credit(x, y, parent_of) for y in r) for x in c]
    best_for_relevant = [max((_credit(x, y, parent_of) for x in c), default=0.0) for y in r]
    return {
        "citation_precision": hits / len(c) if c else 0.0,
        "citation_recall": hits / len(r),
        "citation_precision_hier": sum(best_for_cited) / len(c) if c else 0.0,
        "citation_recall_hier": sum(best_for_relevant) / len(r),
    }


def score_answer(
    item: Mapping[str, Any], ans: ChatAnswer, *, parent_of: ParentOf = parent_from_id
) -> dict[str, float]:
    """Scores of one chat answer against one golden item (keys in the module docstring).

    ``parent_of`` maps a node id to its parent's; the default reads it off the id, pass
    ``lambda i: kb.nodes[i].parent_id`` to use a parsed KB instead.
    """
    unanswerable = bool(item.get("unanswerable"))
    out: dict[str, float] = {
        "unanswerable": float(unanswerable),
        "refused": float(ans.refusal),
        "refusal_correct": float(ans.refusal == unanswerable),
        "latency_ms": float(ans.took_ms),
    }
    phrases = [str(p) for p in item.get("answer_contains") or []]
    if phrases:
        text = "" if ans.refusal else ans.answer
        out["answer_contains"] = sum(phrase_present(p, text) for p in phrases) / len(phrases)
    relevant = [str(r) for r in item.get("relevant") or []]
    if not unanswerable and relevant:
        cited = [str(c["node_id"]) for c in ans.citations]
        out.update(citation_scores(cited, relevant, parent_of))
    return out


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else math.nan


_MEANS = (
    "answer_contains",
    "citation_precision",
    "citation_recall",
    "citation_precision_hier",
    "citation_recall_hier",
)


def aggregate_answer_scores(scores: Iterable[Mapping[str, float]]) -> dict[str, float]:
    """Means over the items each metric applies to, refusal rates and latency percentiles.

    Keys: ``n``; the per-item means (and ``n_<metric>``, how many items had it);
    ``refusal_accuracy``; ``unanswerable_refusal_rate`` (unanswerable items refused) and
    ``false_refusal_rate`` (answerable items refused); ``latency_ms_mean/p50/p95``.
    A metric no item had is NaN.
    """
    rows = list(scores)
    out: dict[str, float] = {"n": float(len(rows))}
    for key in _MEANS:
        vals = [float(r[key]) for r in rows if key in r]
        out[key] = _mean(vals)
        out[f"n_{key}"] = float(len(vals))
    out["refusal_accuracy"] = _mean([float(r["refusal_correct"]) for r in rows])
    unans = [float(r["refused"]) for r in rows if r.get("unanswerable")]
    ans = [float(r["refused"]) for r in rows if not r.get("unanswerable")]
    out["unanswerable_refusal_rate"] = _mean(unans)
    out["false_refusal_rate"] = _mean(ans)
    lat = [float(r["latency_ms"]) for r in rows if "latency_ms" in r]
    out["latency_ms_mean"] = _mean(lat)
    out["latency_ms_p50"] = percentile(lat, 50)
    out["latency_ms_p95"] = percentile(lat, 95)
    return out
