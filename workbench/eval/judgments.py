"""Graded relevance judgments as data: who rated which chapter for which query, and when.

A golden set ``datasets/<name>.yaml`` keeps its judgments beside it in
``datasets/<name>.judgments.jsonl``, one JSON object a line::

    {"query": "q001", "node": "rag/x#A/B", "grade": 2, "rater": "ana", "at": "2026-12-02T05:00:00Z"}

The file is a log: a new rating is appended (atomically, under a lock, so the UI and the
CLI rating at once never lose a line) and a rater's latest line for a pair is what counts,
so a rater can change their mind and the history stays. ``grade`` is 0 (not relevant),
1 (related), 2 (relevant) or 3 (perfect), or ``"later"`` (judge later) or ``"unsure"``
(can't tell); the last two are not grades and never reach a measure.

Several raters on one pair are combined into one grade by the low median of their latest
grades (with two raters who disagree, the lower grade: a chapter counts as relevant only
when the raters agree it is). An explicit judgment overrides the golden set's own
``relevant:`` list for that pair; the list's chapters keep their ``grades:`` value, or the
set's relevance threshold (2), when no one rated them.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.atomic import atomic_append_text
from engine.credentials import user_config_dir
from engine.errors import EngineError

GRADES: dict[int, str] = {0: "not relevant", 1: "related", 2: "relevant", 3: "perfect"}
LATER, UNSURE = "later", "unsure"
FLAGS = (LATER, UNSURE)
# A chapter is relevant to the binary measures (recall, MRR, hit, precision, MAP) when its
# grade is at least this; NDCG uses the grade itself as the gain. A golden set may set
# ``relevant_grade:`` (an imported BEIR set uses 1, its own scale's threshold).
DEFAULT_RELEVANT_GRADE = 2
# What a rater may type: one key per answer, the same in the CLI prompt and the UI.
KEYS: dict[str, int | str] = {"0": 0, "1": 1, "2": 2, "3": 3, "l": LATER, "?": UNSURE}


class JudgmentsError(EngineError):
    """The judgments file or a rating given to it is malformed."""


@dataclass(frozen=True)
class Judgment:
    query_id: str
    node_id: str
    grade: int | str  # 0-3, or LATER / UNSURE
    rater: str
    at: str = ""

    @property
    def graded(self) -> bool:
        return isinstance(self.grade, int)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query_id,
            "node": self.node_id,
            "grade": self.grade,
            "rater": self.rater,
            "at": self.at,
        }


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_grade(text: str | int) -> int | str:
    """``"0"``-``"3"``, ``"l"``/``"later"``, ``"?"``/``"unsure"`` -> the stored value."""
    if isinstance(text, int) and not isinstance(text, bool) and text in GRADES:
        return text
    key = str(text).strip().lower()
    if key in KEYS:
        return KEYS[key]
    if key in FLAGS:
        return key
    raise JudgmentsError(
        f"grade must be 0 (not relevant), 1 (related), 2 (relevant), 3 (perfect), "
        f"'later' or 'unsure'; got {str(text)[:40]!r}"
    )


def judgment(query_id: str, node_id: str, grade: str | int, rater: str) -> Judgment:
    """A checked new judgment stamped with the current time."""
    if not rater.strip():
        raise JudgmentsError("a judgment needs a rater; pass --rater NAME or set WIKIRAG_RATER")
    if not query_id or not node_id:
        raise JudgmentsError("a judgment needs a query id and a chapter id")
    return Judgment(query_id, node_id, parse_grade(grade), rater.strip(), now())


def path_for(golden_path: str | Path) -> Path:
    """``datasets/wiki.yaml`` -> ``datasets/wiki.judgments.jsonl``."""
    p = Path(golden_path)
    return p.with_name(f"{p.stem}.judgments.jsonl")


def read(path: str | Path) -> list[Judgment]:
    """Every line of a judgments file, oldest first ([] when there is no file yet)."""
    p = Path(path)
    if not p.is_file():
        return []
    out: list[Judgment] = []
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            j = Judgment(
                str(d["query"]), str(d["node"]), parse_grade(d["grade"]), str(d["rater"]),
                str(d.get("at", "")),
            )  # fmt: skip
        except (ValueError, KeyError, TypeError, JudgmentsError) as exc:
            raise JudgmentsError(
                f"{p}:{n}: not a judgment ({exc}); each line needs query, node, grade, rater"
            ) from None
        out.append(j)
    return out


def append(path: str | Path, new: Iterable[Judgment]) -> None:
    """Add judgments to the file; each call is one atomic rewrite under the folder's lock."""
    text = "".join(json.dumps(j.to_dict(), ensure_ascii=False) + "\n" for j in new)
    if text:
        atomic_append_text(Path(path), text)


def latest(judgments: Iterable[Judgment]) -> dict[tuple[str, str], dict[str, Judgment]]:
    """(query, chapter) -> rater -> that rater's latest judgment (file order decides)."""
    out: dict[tuple[str, str], dict[str, Judgment]] = {}
    for j in judgments:
        out.setdefault((j.query_id, j.node_id), {})[j.rater] = j
    return out


def consensus(judgments: Iterable[Judgment]) -> dict[str, dict[str, int]]:
    """query -> chapter -> combined grade (low median of raters' latest grades)."""
    out: dict[str, dict[str, int]] = {}
    for (qid, nid), by_rater in latest(judgments).items():
        grades = sorted(int(j.grade) for j in by_rater.values() if j.graded)
        if grades:
            out.setdefault(qid, {})[nid] = grades[(len(grades) - 1) // 2]
    return out


def flagged(judgments: Iterable[Judgment], flag: str) -> set[tuple[str, str]]:
    """Pairs whose raters' latest answers include ``flag`` and no grade (e.g. all "later")."""
    out = set()
    for pair, by_rater in latest(judgments).items():
        answers = [j.grade for j in by_rater.values()]
        if flag in answers and not any(isinstance(a, int) for a in answers):
            out.add(pair)
    return out


def digest(grades: Mapping[str, Mapping[str, int]]) -> str:
    """A short content hash of combined grades (part of the golden set's version)."""
    text = json.dumps({q: dict(sorted(g.items())) for q, g in sorted(grades.items())})
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


RATER_ENV = "WIKIRAG_RATER"


def default_rater(env: Mapping[str, str] | None = None) -> str:
    """``$WIKIRAG_RATER``, else the first line of ``<user config>/rater``, else ""."""
    import os

    environ = os.environ if env is None else env
    if environ.get(RATER_ENV, "").strip():
        return environ[RATER_ENV].strip()
    f = user_config_dir(environ) / "rater"
    if f.is_file():
        lines = f.read_text(encoding="utf-8").splitlines()
        return lines[0].strip() if lines else ""
    return ""
