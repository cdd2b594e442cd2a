"""Import a BEIR-style benchmark as a Markdown KB plus a golden set.

Input folder (BEIR's layout): ``corpus.jsonl`` (``_id``, ``title``, ``text``, optional
``metadata``), ``queries.jsonl`` (``_id``, ``text``, optional ``answers``) and
``qrels.tsv`` (or ``qrels/test.tsv``) with the header ``query-id corpus-id score``.

Output: one Markdown file per passage, ``<kb_out>/<safe _id>.md``, whose only heading
is an H1 with the passage title (or its ``_id``), and a golden set whose ``relevant``
ids point at those H1 chapters. The id follows engine/tree.py's scheme:
``doc_id + "#" + slug(title)`` with doc_id the file name without ".md".
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from engine.atomic import atomic_write_text
from engine.errors import EngineError
from engine.markdown_scan import slugify
from engine.tree import EMPTY_SLUG
from workbench.eval.golden import MAX_RELEVANT

_MAX_NAME = 100


class BeirFormatError(EngineError):
    """A BEIR folder is missing a file or has a malformed line."""


def heading_node_id(doc_id: str, title: str) -> str:
    """Node id of the H1 chapter titled ``title`` in document ``doc_id`` (its first heading)."""
    # the chapter tree owns the slug, so ids agree with the index's
    return f"{doc_id}#{slugify(title) or EMPTY_SLUG}"


_ASCII_PUNCT = re.compile(r"([!-/:-@\[-`{-~])")
_ATX_LINE = re.compile(r"^( {0,3})(#{1,6})(?=\s|$)")
_SETEXT_LINE = re.compile(r"^ {0,3}(=+|-+)\s*$")


def _title_text(title: str) -> str:
    return re.sub(r"\s+", " ", title).strip()


def _escape_inline(text: str) -> str:
    # CommonMark lets any ASCII punctuation be backslash-escaped; escaped, the heading's
    # plain text (what the tree slugs) is exactly the title, whatever it contains.
    return _ASCII_PUNCT.sub(r"\\\1", text)


def _escape_body(text: str) -> str:
    """Keep a passage one chapter: lines that would parse as headings are escaped."""
    lines = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = _ATX_LINE.sub(r"\1\\\2", line)
        if _SETEXT_LINE.match(line):
            line = "\\" + line.lstrip(" ")
        lines.append(line)
    return "\n".join(lines).strip("\n")


def safe_name(doc_id: str) -> str:
    """A file-name stem for a corpus ``_id``: letters, digits, ``_ . -`` kept, the rest ``_``."""
    name = re.sub(r"[^\w.-]", "_", doc_id, flags=re.UNICODE).strip(".") or "_"
    if len(name) > _MAX_NAME:
        name = f"{name[:_MAX_NAME]}-{_short_hash(doc_id)}"
    if name.lower().endswith(("index", "readme")):
        name += "_"  # golden-set validation treats index/README pages as non-answers
    return name


def _short_hash(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def _category(doc: dict[str, Any]) -> str:
    raw = doc.get("metadata")
    meta: dict[str, Any] = raw if isinstance(raw, dict) else {}
    value = doc.get("category") or meta.get("category")
    return str(value) if value else "beir"


def passage_markdown(doc: dict[str, Any]) -> str:
    """The Markdown file for one corpus passage: front matter, an H1, the text."""
    title = _title_text(str(doc.get("title") or "")) or str(doc["_id"])
    front = yaml.safe_dump(
        {"title": title, "type": "concept", "category": _category(doc), "keywords": []},
        allow_unicode=True,
        sort_keys=False,
        width=10_000,
    )
    body = _escape_body(str(doc.get("text") or ""))
    return f"---\n{front}---\n\n# {_escape_inline(title)}\n\n{body}\n"


def _jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        handle = path.open(encoding="utf-8-sig")
    except FileNotFoundError:
        raise BeirFormatError(
            f"{path}: no such file; a BEIR folder has corpus.jsonl and queries.jsonl"
        ) from None
    with handle:
        for lineno, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise BeirFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg})") from None
            if not isinstance(obj, dict) or not str(obj.get("_id") or "").strip():
                raise BeirFormatError(f'{path}:{lineno}: each line needs an object with an "_id"')
            yield lineno, obj


def _qrels_path(folder: Path) -> Path:
    for candidate in (folder / "qrels.tsv", folder / "qrels" / "test.tsv"):
        if candidate.is_file():
            return candidate
    raise BeirFormatError(
        f"{folder}: no qrels.tsv (or qrels/test.tsv); it lists query-id corpus-id score"
    )


def read_qrels_tsv(path: Path) -> dict[str, dict[str, int]]:
    """``{query_id: {corpus_id: score}}`` from a BEIR qrels TSV (header line optional)."""
    qrels: dict[str, dict[str, int]] = {}
    with Path(path).open(encoding="utf-8-sig") as handle:
        for lineno, line in enumerate(handle, start=1):
            cols = line.rstrip("\n").split("\t")
            if not line.strip() or (lineno == 1 and cols[0].strip() == "query-id"):
                continue
            if len(cols) != 3:
                raise BeirFormatError(
                    f"{path}:{lineno}: expected 3 tab-separated columns, found {len(cols)}"
                )
            qid, did, score_text = (c.strip() for c in cols)
            try:
                score = float(score_text)
            except ValueError:
                score = float("nan")
            if not score.is_integer():
                raise BeirFormatError(
                    f"{path}:{lineno}: score {score_text!r} is not an integer grade"
                )
            qrels.setdefault(qid, {})[did] = int(score)
    return qrels


@dataclass(frozen=True)
class BeirImport:
    """What an import wrote, and what it had to leave out or cut."""

    kb_dir: Path
    dataset_path: Path
    passages: int
    queries: int
    node_ids: dict[str, str] = field(repr=False)  # corpus _id -> H1 node id
    skipped_queries: tuple[str, ...] = ()  # judged, but empty text or no relevant passage
    truncated_queries: tuple[str, ...] = ()  # more than 4 relevant; the 4 best kept

    def to_dict(self) -> dict[str, Any]:
        return {
            "kb_dir": str(self.kb_dir),
            "dataset_path": str(self.dataset_path),
            "passages": self.passages,
            "queries": self.queries,
            "skipped_queries": len(self.skipped_queries),
            "truncated_queries": len(self.truncated_queries),
        }


def import_beir(
    folder: str | Path,
    kb_out: str | Path,
    dataset_out: str | Path,
    *,
    limit_queries: int | None = None,
    name: str | None = None,
    force: bool = False,
) -> BeirImport:
    """Write the passages of a BEIR folder as Markdown and its judged queries as a golden set.

    Queries are taken in ``queries.jsonl`` order; those with empty text or with no
    relevant (score > 0) passage in the corpus are skipped (``skipped_queries`` lists
    the ones the qrels judge), and ``limit_queries`` keeps the first N of the
    rest. A query with more than 4 relevant passages keeps the 4 highest-graded (ties in
    qrels order) and says so in its ``notes``. Grades above 1 are kept in ``grades``.
    """
    if limit_queries is not None and limit_queries < 1:
        raise ValueError("limit_queries must be at least 1")
    folder = Path(folder)
    if not folder.is_dir():
        raise BeirFormatError(f"{folder}: not a folder; point at the folder holding corpus.jsonl")
    kb_dir = Path(kb_out)
    _refuse_overwrite(kb_dir, Path(dataset_out), force)
    qrels = read_qrels_tsv(_qrels_path(folder))
    # Passages go to a hidden folder beside the target, moved into place only once the whole
    # import has worked: an error leaves the old KB (or nothing) and no half-written folder.
    kb_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{kb_dir.name}.import-", dir=kb_dir.parent))
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # mkdtemp's 0700 would become the KB folder's mode
    try:
        result = _import(folder, kb_dir, staging, Path(dataset_out), qrels, limit_queries, name)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result


def _refuse_overwrite(kb_dir: Path, dataset_out: Path, force: bool) -> None:
    if force:
        return
    if kb_dir.exists() and (not kb_dir.is_dir() or any(kb_dir.iterdir())):
        raise BeirFormatError(
            f"{kb_dir} exists and is not empty; pass --force to replace it (its files are "
            "removed), or choose another --kb-out"
        )
    if dataset_out.exists():
        raise BeirFormatError(
            f"{dataset_out} exists; pass --force to replace it, or choose another --dataset-out"
        )


def _swap_in(staging: Path, kb_dir: Path) -> None:
    """``staging`` becomes ``kb_dir``; an old ``kb_dir`` is moved aside first, then removed."""
    old = None
    if kb_dir.exists() or kb_dir.is_symlink():
        old = Path(tempfile.mkdtemp(prefix=f".{kb_dir.name}.old-", dir=kb_dir.parent))
        os.replace(kb_dir, old / "kb")
    os.replace(staging, kb_dir)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def _import(
    folder: Path,
    kb_dir: Path,
    staging: Path,
    dataset_out: Path,
    qrels: dict[str, dict[str, int]],
    limit_queries: int | None,
    name: str | None,
) -> BeirImport:
    node_ids: dict[str, str] = {}
    used: set[str] = set()
    passages = 0
    for lineno, doc in _jsonl(folder / "corpus.jsonl"):
        did = str(doc["_id"])
        if did in node_ids:
            raise BeirFormatError(f"{folder / 'corpus.jsonl'}:{lineno}: _id {did!r} appears twice")
        stem = safe_name(did)
        if stem.lower() in used:  # also guards case-insensitive file systems
            stem = f"{stem}-{_short_hash(did)}"
        used.add(stem.lower())
        title = _title_text(str(doc.get("title") or "")) or did
        node_ids[did] = heading_node_id(stem, title)
        (staging / f"{stem}.md").write_text(passage_markdown(doc), encoding="utf-8")
        passages += 1

    items: list[dict[str, Any]] = []
    skipped: list[str] = []
    truncated: list[str] = []
    seen_q: set[str] = set()
    for lineno, q in _jsonl(folder / "queries.jsonl"):
        qid = str(q["_id"])
        if qid in seen_q:
            raise BeirFormatError(f"{folder / 'queries.jsonl'}:{lineno}: _id {qid!r} appears twice")
        seen_q.add(qid)
        judged = {d: g for d, g in qrels.get(qid, {}).items() if g > 0 and d in node_ids}
        text = str(q.get("text") or "").strip()
        if not judged or not text:
            if qid in qrels:
                skipped.append(qid)  # a golden item needs a query and a relevant chapter
            continue
        if limit_queries is not None and len(items) >= limit_queries:
            break
        ranked = sorted(judged, key=lambda d: -judged[d])  # stable: qrels order among ties
        item: dict[str, Any] = {
            "id": qid,
            "query": text,
            "relevant": [node_ids[d] for d in ranked[:MAX_RELEVANT]],
            "difficulty": "medium",
            "category": "beir",
        }
        answers = [str(a).strip() for a in q.get("answers") or [] if str(a).strip()]
        if answers:
            item["answer_contains"] = list(dict.fromkeys(answers))
        if len(ranked) > MAX_RELEVANT:
            truncated.append(qid)
            item["notes"] = (
                f"{len(ranked)} relevant passages in the qrels; the {MAX_RELEVANT} best kept"
            )
        if any(judged[d] > 1 for d in ranked[:MAX_RELEVANT]):
            item["grades"] = {node_ids[d]: judged[d] for d in ranked[:MAX_RELEVANT]}
        items.append(item)

    dataset: dict[str, Any] = {"name": name or folder.resolve().name}
    if any("grades" in i for i in items):
        dataset["relevant_grade"] = 1  # BEIR's scale: any positive grade is relevant
    dataset["queries"] = items
    text = yaml.safe_dump(dataset, allow_unicode=True, sort_keys=False, width=10_000)
    _swap_in(staging, kb_dir)
    atomic_write_text(Path(dataset_out), text)
    return BeirImport(
        kb_dir=kb_dir,
        dataset_path=Path(dataset_out),
        passages=passages,
        queries=len(items),
        node_ids=node_ids,
        skipped_queries=tuple(skipped),
        truncated_queries=tuple(truncated),
    )
