"""One story per miss: the cause of a missed gold chapter as a typed value, computed once
from the run record and rendered by one function, so every table, card and side-by-side
list says the same thing.

A query's cause is its most upstream chapter cause (attribution sorts chapters by
``CAUSES`` order, so it is the first); when its missing chapters were lost at different
stages the query's text names each, instead of the table showing one and the card another.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.eval.attribution import CAUSES, Attribution
from workbench.eval.messages import Message, join
from workbench.eval.run_record import QueryRecord

NOT_RANKED = "—"  # a stage that did not rank the chapter (never a raw None)


@dataclass(frozen=True)
class MissCause:
    """Why one gold chapter is not in the top K: a CAUSES code plus the stage ranks."""

    code: str  # a key of CAUSES
    node_id: str
    final_rank: int | None
    fusion_rank: int | None
    vector_rank: int | None  # within the channel's candidate pool
    bm25_rank: int | None
    vector_rank_any: int | None  # in the channel's whole cached list
    bm25_rank_any: int | None

    @classmethod
    def from_attribution(cls, a: Attribution) -> MissCause:
        return cls(
            a.cause,
            a.node_id,
            a.final_rank,
            a.fusion_rank,
            a.vector_rank,
            a.bm25_rank,
            a.vector_rank_any,
            a.bm25_rank_any,
        )

    @property
    def message(self) -> Message:
        """The cause alone ("lost in BM25 candidates"), translatable."""
        return cause_message(self.code)

    @property
    def detail(self) -> Message:
        """The stage ranks behind it, with a dash where a stage did not rank it."""
        return Message(
            "final {final}, fusion {fusion}, vector {vector}, BM25 {bm25}",
            {
                "final": rank_text(self.final_rank),
                "fusion": rank_text(self.fusion_rank),
                "vector": rank_text(self.vector_rank, self.vector_rank_any),
                "bm25": rank_text(self.bm25_rank, self.bm25_rank_any),
            },
        )

    def text(self) -> str:
        return self.message.render()

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "node_id": self.node_id,
            "text": self.text(),
            "message": self.message.to_dict(),
            "detail": self.detail.to_dict(),
        }


def cause_message(code: str) -> Message:
    """A CAUSES code as a message ("error" for a query that failed to run)."""
    if code == "error":
        return Message("the query failed to run")
    return Message(CAUSES.get(code, code))


def rank_text(rank: int | None, rank_any: int | None = None) -> str | Message:
    """A stage rank for a table cell: ``3``; ``41 (past the pool)`` when the channel had it
    only below its candidate pool; a dash when the stage did not rank it at all."""
    if rank is not None:
        return str(rank)
    if rank_any is not None:
        return Message("{rank} (past the pool)", {"rank": rank_any})
    return NOT_RANKED


def chapter_causes(q: QueryRecord) -> tuple[MissCause, ...]:
    """Each missed gold chapter's cause, most upstream first (the record's order)."""
    return tuple(MissCause.from_attribution(a) for a in q.attribution)


@dataclass(frozen=True)
class QueryMiss:
    """A query's miss: its headline cause code and every chapter's cause."""

    code: str  # the first chapter's cause, or "error"
    chapters: tuple[MissCause, ...]

    @property
    def message(self) -> Message:
        codes = list(dict.fromkeys(c.code for c in self.chapters))
        if len(codes) <= 1:
            return cause_message(self.code)
        # Chapters lost at different stages: name each (the table once showed the first
        # chapter's cause and the card another chapter's).
        return join(
            [
                Message(
                    "{cause} ({n} of {total} missed chapters)",
                    {
                        "cause": cause_message(code),
                        "n": sum(1 for c in self.chapters if c.code == code),
                        "total": len(self.chapters),
                    },
                )
                for code in codes
            ]
        )

    def text(self) -> str:
        return self.message.render()

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "text": self.text(),
            "message": self.message.to_dict(),
            "chapters": [c.to_dict() for c in self.chapters],
        }


def query_miss(q: QueryRecord) -> QueryMiss | None:
    """The query's miss at K, None when every gold chapter is in the top K."""
    chapters = chapter_causes(q)
    if q.cause is None:
        return QueryMiss("error", chapters) if q.error else None
    return QueryMiss(q.cause, chapters)


def gold_fate(q: QueryRecord, node_id: str) -> MissCause | None:
    """The cause that lost gold chapter ``node_id`` in this query, None when it is found."""
    return next((c for c in chapter_causes(q) if c.node_id == node_id), None)
