"""TREC qrels and run files, read and written the way trec_eval reads them.

- qrels: ``qid iter docid rel`` (whitespace separated; ``iter`` is ignored; ``rel`` an
  integer, possibly negative).
- run: ``qid Q0 docid rank score tag``; words after the tag are ignored (trec_eval's
  own fixture ``results.trunc`` has them). trec_eval ignores the rank column and orders
  each query's documents by score descending, ties by docid descending; so do we
  (:func:`workbench.eval.metrics.rank_by_score`).

A line whose first non-blank character is ``#`` is a comment; blank lines are skipped.
A ``#`` elsewhere is data (TREC docnos such as ``msmarco_v2.1_doc_00_1#4_1`` contain it).
A malformed line or a repeated (qid, docid) raises :class:`TrecFormatError` naming the
file and line number; trec_eval rejects duplicates too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TypeVar

from engine.atomic import atomic_write_text
from engine.errors import EngineError
from workbench.eval.metrics import rank_by_score

V = TypeVar("V", int, float)


class TrecFormatError(EngineError):
    """A qrels or run file is missing or has a malformed line."""


def _lines(path: Path | str) -> Iterator[tuple[int, list[str]]]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise TrecFormatError(f"{path}: no such file; check the path") from None
    except IsADirectoryError:
        raise TrecFormatError(f"{path}: is a folder, expected a TREC file") from None
    except UnicodeDecodeError as exc:
        raise TrecFormatError(
            f"{path}: not UTF-8 text ({exc.reason}); re-save it as UTF-8"
        ) from None
    for lineno, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        yield lineno, stripped.split()


def read_qrels(path: Path | str) -> dict[str, dict[str, int]]:
    """``{qid: {docid: grade}}`` from a TREC qrels file (query order kept)."""
    qrels: dict[str, dict[str, int]] = {}
    for lineno, cols in _lines(path):
        if len(cols) != 4:
            raise TrecFormatError(
                f"{path}:{lineno}: expected 4 columns 'qid iter docid rel', found {len(cols)}"
            )
        qid, _, docid, rel = cols
        try:
            grade = int(rel)
        except ValueError:
            raise TrecFormatError(
                f"{path}:{lineno}: relevance {rel!r} is not an integer (grades are 0, 1, 2, ...)"
            ) from None
        _put_once(qrels, qid, docid, grade, f"{path}:{lineno}: {docid} is judged twice")
    return qrels


def read_run_scores(path: Path | str) -> dict[str, dict[str, float]]:
    """``{qid: {docid: score}}`` from a TREC run file (the rank column is ignored)."""
    run: dict[str, dict[str, float]] = {}
    for lineno, cols in _lines(path):
        if len(cols) < 6:
            raise TrecFormatError(
                f"{path}:{lineno}: expected 6 columns 'qid Q0 docid rank score tag', found {len(cols)}"
            )
        qid, _, docid, _, score_text = cols[:5]
        try:
            score = float(score_text)
        except ValueError:
            raise TrecFormatError(
                f"{path}:{lineno}: score {score_text!r} is not a number"
            ) from None
        if math.isnan(score):
            raise TrecFormatError(f"{path}:{lineno}: score is NaN; scores must be comparable")
        _put_once(run, qid, docid, score, f"{path}:{lineno}: {docid} appears twice")
    return run


def _put_once(table: dict[str, dict[str, V]], qid: str, docid: str, value: V, twice: str) -> None:
    """``table[qid][docid] = value``; a second line for the same pair is an error, not a merge."""
    docs = table.setdefault(qid, {})
    if docid in docs:
        raise TrecFormatError(f"{twice} for query {qid}; keep one line")
    docs[docid] = value


def read_run(path: Path | str) -> dict[str, list[str]]:
    """``{qid: [docid, ...]}`` ranked as trec_eval ranks them (score desc, docid desc)."""
    return {qid: rank_by_score(scores) for qid, scores in read_run_scores(path).items()}


def read_run_tag(path: Path | str) -> str:
    """The tag (6th column) of the first data line, '' for an empty run."""
    for _, cols in _lines(path):
        return cols[5] if len(cols) >= 6 else ""
    return ""


def _check_token(kind: str, value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise ValueError(
            f"{kind} {value!r} is empty or contains whitespace; TREC files are space separated"
        )
    return value


def format_qrels(qrels: Mapping[str, Mapping[str, int]]) -> str:
    """TREC qrels text, queries and documents in the given order."""
    lines = []
    for qid, judged in qrels.items():
        for docid, grade in judged.items():
            lines.append(
                f"{_check_token('query id', qid)} 0 {_check_token('doc id', docid)} {int(grade)}"
            )
    return "".join(line + "\n" for line in lines)


def format_ranked(run: Iterable[tuple[str, Sequence[str]]], tag: str = "wikirag") -> str:
    """THE TREC run writer for rankings: ``(qid, [docid, ...best first])`` pairs.

    trec_eval ignores the rank column and re-sorts each query by score (ties by docid
    descending), so a file whose scores tie or rise is scored in another order than the
    one the workbench evaluated (issue 12: `eval` said MRR 0.9026, the exported file
    0.9145, because 6-decimal engine scores tied). Scores are therefore derived from the
    rank, ``n - rank + 1``: distinct small integers, exact in float32 as in float64, so
    trec_eval, pytrec_eval and ranx rank every query exactly as given. The engine's own
    scores stay in the run record (``ranked[].score``). A repeated document keeps its
    first position; a repeated query id is an error (it would merge two queries).
    """
    rows = []
    for qid, ranked in run:
        docs = list(dict.fromkeys(ranked))
        rows.append((qid, [(doc, float(len(docs) - i)) for i, doc in enumerate(docs)]))
    return _run_text(rows, tag)


def _run_text(rows: Iterable[tuple[str, Sequence[tuple[str, float]]]], tag: str) -> str:
    _check_token("tag", tag)
    lines, seen = [], set()
    for qid, ranked in rows:
        _check_token("query id", qid)
        if qid in seen:
            raise ValueError(f"query id {qid!r} appears twice; TREC runs need unique ids")
        seen.add(qid)
        for rank, (docid, score) in enumerate(ranked, start=1):
            lines.append(f"{qid} Q0 {_check_token('doc id', docid)} {rank} {score!r} {tag}")
    return "".join(line + "\n" for line in lines)


def format_run(scores: Mapping[str, Mapping[str, float]], tag: str = "wikirag") -> str:
    """TREC run text from scores, kept exactly; lines ordered as trec_eval will rank them."""
    return _run_text(
        ((qid, [(d, docs[d]) for d in rank_by_score(docs)]) for qid, docs in scores.items()),
        tag,
    )


def format_ranking(run: Mapping[str, Sequence[str]], tag: str = "wikirag") -> str:
    """TREC run text from ``{qid: [docid, ...best first]}`` (see :func:`format_ranked`)."""
    return format_ranked(run.items(), tag)


def write_qrels(path: Path | str, qrels: Mapping[str, Mapping[str, int]]) -> None:
    """Write a TREC qrels file atomically."""
    atomic_write_text(Path(path), format_qrels(qrels))


def write_run(
    path: Path | str, scores: Mapping[str, Mapping[str, float]], tag: str = "wikirag"
) -> None:
    """Write a TREC run file from ``{qid: {docid: score}}`` atomically."""
    atomic_write_text(Path(path), format_run(scores, tag))


def write_ranking(path: Path | str, run: Mapping[str, Sequence[str]], tag: str = "wikirag") -> None:
    """Write a TREC run file from ``{qid: [docid, ...]}`` (best first) atomically."""
    atomic_write_text(Path(path), format_ranking(run, tag))
