"""Golden sets: load, validate, edit and save ``datasets/<name>.yaml`` without losing work.

Saves go through ruamel.yaml's round-trip mode so the user's comments, key order and
quoting survive an edit made by the workbench, and through an atomic temp-file + rename
so a crash never truncates the file.
"""

from __future__ import annotations

import hashlib
import io
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq

from engine.atomic import atomic_write_text
from engine.cjk import cjk_count
from engine.errors import ConfigError, EngineError, yaml_error_summary
from engine.yaml_safe import refuse_aliases, short
from workbench.eval import judgments as J
from workbench.eval.golden_issue import Issue
from workbench.eval.messages import Message
from workbench.eval.stale_ids import suggest_ids

DIFFICULTIES = ("easy", "medium", "hard")
TARGET_MIX = {"easy": 0.3, "medium": 0.5, "hard": 0.2}
SPLITS = ("tune", "holdout")
# An answerable item lists 1-4 relevant chapters (docs/design.md, "Data contracts"): more would
# mean the question is too broad to label.
MIN_RELEVANT, MAX_RELEVANT = 1, 4
HOLDOUT_SHARE = 0.25  # fraction of ids whose hash puts them in the holdout split
# The item keys this module writes (any other key is the user's and is kept).
_KNOWN_KEYS = frozenset(("id", "query", "relevant", "difficulty", "category", "answer_contains"))
_KNOWN_KEYS |= {"notes", "split", "unanswerable", "grades"}


class GoldenSetError(EngineError):
    """The golden-set file cannot be read at all (syntax, shape)."""


@dataclass(frozen=True)
class GoldenItem:
    id: str
    query: str
    relevant: tuple[str, ...] = ()
    difficulty: str = "medium"
    category: str = ""
    answer_contains: tuple[str, ...] = ()
    notes: str = ""
    split: str = "tune"
    unanswerable: bool = False
    grades: Mapping[str, int] = field(default_factory=dict)  # optional graded relevance
    # Not part of the YAML item: the combined grades of the judgments file beside the set,
    # and the set's binary threshold (both set by load()).
    judged: Mapping[str, int] = field(default_factory=dict, compare=False)
    relevant_grade: int = field(default=J.DEFAULT_RELEVANT_GRADE, compare=False)

    @property
    def language(self) -> str:
        """'zh' when the query is mostly CJK, else 'en' (used for per-language breakdowns)."""
        cjk = cjk_count(self.query)
        letters = sum(ch.isalpha() for ch in self.query)
        return "zh" if letters and cjk / letters >= 0.3 else "en"

    @property
    def qrels(self) -> dict[str, int]:
        """Chapter -> grade: the listed chapters (their ``grades`` value, else the relevance
        threshold), overridden by the judgments file's combined grades."""
        out = {nid: int(self.grades.get(nid, self.relevant_grade)) for nid in self.relevant}
        out.update(self.judged)
        return out

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"id": self.id, "query": self.query}
        if self.unanswerable:
            d["unanswerable"] = True
        else:
            d["relevant"] = list(self.relevant)
        d["difficulty"] = self.difficulty
        if self.category:
            d["category"] = self.category
        if self.answer_contains:
            d["answer_contains"] = list(self.answer_contains)
        if self.notes:
            d["notes"] = self.notes
        d["split"] = self.split
        if self.grades:
            d["grades"] = dict(self.grades)
        return d


@dataclass(frozen=True)
class GoldenSet:
    name: str
    items: tuple[GoldenItem, ...]
    path: Path | None = None
    sha256: str = ""  # of the file bytes as loaded: detects external edits before a save

    def answerable(self, split: str = "all") -> list[GoldenItem]:
        return [i for i in self.select(split) if not i.unanswerable]

    def select(self, split: str = "all") -> list[GoldenItem]:
        if split == "all":
            return list(self.items)
        if split not in SPLITS:
            raise ValueError(f"split must be tune, holdout or all; got {split!r}")
        return [i for i in self.items if i.split == split]

    def get(self, item_id: str) -> GoldenItem | None:
        return next((i for i in self.items if i.id == item_id), None)

    @property
    def content_hash(self) -> str:
        """The version of the questions and their judgments that every run records."""
        text = repr([i.to_dict() for i in self.items])
        judged = {i.id: i.judged for i in self.items if i.judged}
        level = {i.relevant_grade for i in self.items} - {J.DEFAULT_RELEVANT_GRADE}
        if judged or level:  # a set without judgments keeps the hash it always had
            text += J.digest(judged) + repr(sorted(level))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def default_split(item_id: str) -> str:
    """Deterministic tune/holdout assignment from a hash of the id (25% holdout)."""
    h = int(hashlib.sha256(item_id.encode("utf-8")).hexdigest()[:8], 16)
    return "holdout" if (h % 10_000) / 10_000 < HOLDOUT_SHARE else "tune"


def _yaml() -> YAML:
    y = YAML()  # round-trip: keeps comments and order
    y.allow_unicode = True
    y.width = 4096
    y.indent(mapping=2, sequence=4, offset=2)
    y.preserve_quotes = True
    return y


def load(path: str | Path) -> GoldenSet:
    p = Path(path)
    if not p.is_file():
        raise GoldenSetError(
            f"golden set {p} not found; create one in the Golden set page or copy datasets/wiki.yaml"
        )
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise GoldenSetError(
            f"golden set {p} is not UTF-8 text ({exc}); re-save it as UTF-8"
        ) from exc
    gs = parse(text, path=p, sha256=hashlib.sha256(raw).hexdigest())
    return with_judgments(gs, J.read(J.path_for(p)))


def with_judgments(gs: GoldenSet, judgments: Iterable[J.Judgment]) -> GoldenSet:
    """``gs`` with each item's combined judged grades attached (used by every measure)."""
    grades = J.consensus(judgments)
    items = tuple(replace(i, judged=grades.get(i.id, {})) for i in gs.items)
    return replace(gs, items=items)


def parse(text: str, path: Path | None = None, sha256: str = "") -> GoldenSet:
    try:
        refuse_aliases(text, f"golden set {path or ''}".rstrip())
    except ConfigError as exc:
        raise GoldenSetError(str(exc)) from exc
    try:
        data = _yaml().load(text)
    except Exception as exc:  # ruamel raises several unrelated error types
        raise GoldenSetError(
            f"golden set {path or ''} is not valid YAML: {yaml_error_summary(exc)}"
        ) from exc
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise GoldenSetError("a golden set must be a mapping with `name` and `queries`")
    queries = data.get("queries") or []
    if not isinstance(queries, Sequence) or isinstance(queries, str):
        raise GoldenSetError("`queries` must be a list of items")
    items = []
    for n, q in enumerate(queries, 1):
        if not isinstance(q, Mapping):
            raise GoldenSetError(f"query #{n} must be a mapping with id, query, relevant")
        items.append(_item(q, n))
    name = str(data.get("name") or (path.stem if path else "golden"))
    level = data.get("relevant_grade", J.DEFAULT_RELEVANT_GRADE)
    if isinstance(level, bool) or not isinstance(level, int) or level < 1:
        raise GoldenSetError(f"`relevant_grade` must be a whole number >= 1; got {short(level)}")
    items = [replace(i, relevant_grade=level) for i in items]
    return GoldenSet(name=name, items=tuple(items), path=path, sha256=sha256)


def _item(q: Mapping[str, Any], n: int) -> GoldenItem:
    item_id = str(q.get("id") or f"q{n:03d}")
    rel = _str_list(q, "relevant", item_id, "node ids")
    ac = _str_list(q, "answer_contains", item_id, "phrases")
    grades = q.get("grades") or {}
    if not isinstance(grades, Mapping):
        raise GoldenSetError(f"{item_id}: `grades` must map node ids to integers, e.g. {{id: 2}}")
    out: dict[str, int] = {}
    for k, v in grades.items():
        # int(1e999) overflows and int("x") is a ValueError; 2.5 would silently become 2.
        if isinstance(v, bool) or not isinstance(v, int):
            raise GoldenSetError(
                f"{item_id}: `grades` values must be whole numbers like 1 or 2; "
                f"got {short(v)} for {short(k)}"
            )
        out[str(k)] = v
    grades = out
    query, unanswerable = q.get("query"), q.get("unanswerable", False)
    if (query is not None and not isinstance(query, str | int | float)) or isinstance(query, bool):
        raise GoldenSetError(f"{item_id}: `query` must be a string, got {short(query)}")
    if unanswerable is not None and not isinstance(unanswerable, bool):  # bool("false") is True
        raise GoldenSetError(f"{item_id}: `unanswerable` must be true or false (unquoted), got "
                             f"{short(unanswerable)}")  # fmt: skip
    return GoldenItem(
        id=item_id,
        query=str(query or "").strip(),
        relevant=rel,
        difficulty=str(q.get("difficulty") or "medium"),
        category=str(q.get("category") or ""),
        answer_contains=ac,
        notes=str(q.get("notes") or ""),
        split=str(q.get("split") or default_split(item_id)),
        unanswerable=bool(unanswerable),
        grades=grades,
    )


def checked(
    gs: GoldenSet,
    kb: Any | None = None,
    *,
    allow_invalid: bool = False,
    notify: Callable[[str], None] | None = None,
) -> GoldenSet:
    """``gs`` if it has no errors; else refuse, or with ``allow_invalid`` drop the bad items.

    Scoring an invalid set gives numbers that look fine and mean little (an unknown id is
    a query no config can get right; a duplicate id collapses two queries into one), so
    `eval` and `experiment try` call this first. Every occurrence of a duplicated id is
    dropped: which one is "right" is unknowable. ``notify`` hears what was skipped.
    """
    errors = [i for i in validate(gs, kb) if i.level == "error"]
    if not errors:
        return gs
    if not allow_invalid:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise GoldenSetError(
            f"golden set {gs.name} is invalid: {errors[0]}{more}; fix it (`wikirag golden "
            "validate` lists every error) or pass --allow-invalid to score only valid items"
        )
    bad = {i.item_id for i in errors if i.item_id}
    unplaced = [i for i in errors if not i.item_id]
    if unplaced:
        raise GoldenSetError(f"golden set {gs.name} is invalid: {unplaced[0]}")
    kept = tuple(it for it in gs.items if it.id not in bad)
    if notify is not None:
        skipped = len(gs.items) - len(kept)
        ids = ", ".join(sorted(bad)[:10]) + (" ..." if len(bad) > 10 else "")
        notify(
            f"--allow-invalid: skipped {skipped} of {len(gs.items)} golden items with errors "
            f"({ids}); first error: {errors[0]}"
        )
    return replace(gs, items=kept)


def _str_list(q: Mapping[str, Any], key: str, item_id: str, what: str) -> tuple[str, ...]:
    """A string or a list of strings/numbers; anything else is a one-line error."""
    value = q.get(key)
    if value is None or value == "":
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence) and all(
        isinstance(v, str | int | float) and not isinstance(v, bool) for v in value
    ):
        return tuple(str(v) for v in value)
    raise GoldenSetError(
        f'{item_id}: `{key}` must be a list of {what}, e.g. ["a", "b"]; got {short(value)}'
    )


def validate(gs: GoldenSet, kb: Any | None = None) -> list[Issue]:
    """Errors (must fix) and coverage warnings. ``kb`` is an engine KnowledgeBase, optional."""
    issues: list[Issue] = []
    seen_ids: Counter[str] = Counter(i.id for i in gs.items)
    for dup, count in seen_ids.items():
        if count > 1:
            issues.append(Issue("error", dup, f"id used {count} times; ids must be unique"))
    seen_q: dict[str, str] = {}
    for it in gs.items:
        if not it.query:
            issues.append(Issue("error", it.id, "query is empty"))
        key = re.sub(r"\s+", " ", it.query.lower())
        if key and key in seen_q:
            issues.append(Issue("error", it.id, f"same query as {seen_q[key]}"))
        seen_q.setdefault(key, it.id)
        if it.difficulty not in DIFFICULTIES:
            issues.append(
                Issue(
                    "error",
                    it.id,
                    f"difficulty must be easy, medium or hard; got {it.difficulty!r}",
                )
            )
        if it.split not in SPLITS:
            issues.append(Issue("error", it.id, f"split must be tune or holdout; got {it.split!r}"))
        if it.unanswerable:
            if it.relevant:
                issues.append(
                    Issue("error", it.id, "unanswerable items must not list relevant ids")
                )
            continue
        if not MIN_RELEVANT <= len(it.relevant) <= MAX_RELEVANT:
            issues.append(
                Issue(
                    "error",
                    it.id,
                    f"needs {MIN_RELEVANT}-{MAX_RELEVANT} relevant node ids; "
                    f"has {len(it.relevant)}",
                )
            )
        if len(set(it.relevant)) != len(it.relevant):
            issues.append(Issue("error", it.id, "relevant lists a node id twice"))
        if kb is not None:
            for nid in it.relevant:
                node = kb.get(nid)
                if node is None:
                    issues.append(
                        Issue(
                            "error",
                            it.id,
                            f"unknown node id {nid!r} (stale after a wiki edit?)",
                            tuple(suggest_ids(nid, kb)),
                        )
                    )
                elif _is_index_node(node):
                    issues.append(
                        Issue(
                            "error",
                            it.id,
                            f"{nid!r} is an index/README node; label the chapter that answers",
                        )
                    )
    issues.extend(coverage_warnings(gs))
    return issues


def _is_index_node(node: Any) -> bool:
    fp = str(getattr(node, "file_path", "")).lower()
    name = fp.rsplit("/", 1)[-1]
    # Hugo's `_index.md` is a section's own content page (most of the GitLab handbook
    # lives in them), not a table of contents, so its chapters are valid labels.
    return (
        getattr(node, "doc_type", "") == "domain-root" or name == "readme.md" or name == "index.md"
    )


def coverage_warnings(gs: GoldenSet) -> list[Issue]:
    out: list[Issue] = []
    items = gs.answerable()
    if len(items) < 30:
        msg = Message("only {n} answerable queries; aim for >= 30", {"n": len(items)})
        out.append(Issue.of("warning", None, msg))
    cats = Counter(i.category or "(none)" for i in items)
    for cat, n in sorted(cats.items()):
        if n < 2:
            msg = Message("category {cat} has {n} query; aim for >= 2", {"cat": repr(cat), "n": n})
            out.append(Issue.of("warning", None, msg))
    if items:
        mix = Counter(i.difficulty for i in items)
        for d, target in TARGET_MIX.items():
            share = mix.get(d, 0) / len(items)
            if abs(share - target) > 0.15:
                out.append(
                    Issue.of(
                        "warning",
                        None,
                        Message(
                            "{d} is {share} of queries; target mix is 30/50/20 easy/medium/hard",
                            {"d": d, "share": f"{share:.0%}"},
                        ),
                    )
                )
    return out


class ConflictError(GoldenSetError):
    """The file changed on disk since it was loaded; saving would overwrite someone's edit."""


def dump(gs: GoldenSet, base_text: str | None = None) -> str:
    """Serialise, keeping comments/order of ``base_text`` (the file as it was) where possible."""
    y = _yaml()
    doc = y.load(base_text) if base_text else None
    if not isinstance(doc, CommentedMap):
        doc = CommentedMap()
    doc["name"] = gs.name
    old = doc.get("queries")
    old_by_id: dict[str, CommentedMap] = {}
    if isinstance(old, CommentedSeq):
        for q in old:
            if isinstance(q, CommentedMap) and "id" in q:
                old_by_id[str(q["id"])] = q
    seq = CommentedSeq()
    for it in gs.items:
        new = it.to_dict()
        if not _explicit_split(old_by_id.get(it.id)) and it.split == default_split(it.id):
            new.pop("split", None)  # keep files short: the default split is implied by the id
        prev = old_by_id.get(it.id)
        if prev is not None and "difficulty" not in prev and it.difficulty == "medium":
            new.pop("difficulty", None)  # implied too: a no-op save must not touch the item
        q = old_by_id.get(it.id, CommentedMap())
        for key in list(q.keys()):
            if key in _KNOWN_KEYS and key not in new:
                del q[key]
        for key, value in new.items():
            if isinstance(value, list):
                cs = CommentedSeq(value)
                cs.fa.set_flow_style()
                value = cs
            if q.get(key) != value:
                q[key] = value
        seq.append(q)
    doc["queries"] = seq
    buf = io.StringIO()
    y.dump(doc, buf)
    return buf.getvalue()


def _explicit_split(q: CommentedMap | None) -> bool:
    return q is not None and "split" in q


def save(gs: GoldenSet, path: str | Path | None = None, *, force: bool = False) -> GoldenSet:
    """Atomically save; refuse (ConflictError) if the file changed since it was loaded."""
    p = Path(path or gs.path or "")
    if not str(p):
        raise GoldenSetError("no path to save the golden set to")
    base_text = None
    same_file = gs.path is not None and p.resolve() == Path(gs.path).resolve()
    if p.is_file():
        raw = p.read_bytes()
        if not same_file and not force:
            raise ConflictError(f"{p} already exists; save with force to overwrite it")
        if same_file and not force and gs.sha256 and hashlib.sha256(raw).hexdigest() != gs.sha256:
            raise ConflictError(
                f"{p} was changed outside the workbench since it was loaded; reload it "
                "(your edits are kept in the page) or save with force to overwrite"
            )
        if same_file:  # keep this file's comments and order; another file's are not ours
            base_text = raw.decode("utf-8-sig")
    text = dump(gs, base_text)
    atomic_write_text(p, text)
    return GoldenSet(gs.name, gs.items, p, hashlib.sha256(text.encode("utf-8")).hexdigest())


def with_item(gs: GoldenSet, item: GoldenItem) -> GoldenSet:
    """Add or replace (by id) one item; an edit keeps the judgments of the item it replaces."""
    old = gs.get(item.id)
    if old is not None and not item.judged:
        item = replace(item, judged=old.judged, relevant_grade=old.relevant_grade)
    items = [i for i in gs.items if i.id != item.id]
    idx = next((n for n, i in enumerate(gs.items) if i.id == item.id), len(items))
    items.insert(idx, item)
    return GoldenSet(gs.name, tuple(items), gs.path, gs.sha256)


def without_item(gs: GoldenSet, item_id: str) -> GoldenSet:
    return GoldenSet(gs.name, tuple(i for i in gs.items if i.id != item_id), gs.path, gs.sha256)


def next_id(gs: GoldenSet | Iterable[str], prefix: str = "q") -> str:
    ids = [i.id for i in gs.items] if isinstance(gs, GoldenSet) else list(gs)
    nums = [int(m.group(1)) for i in ids if (m := re.fullmatch(rf"{prefix}(\d+)", i))]
    return f"{prefix}{(max(nums) + 1) if nums else 1:03d}"


def item_from_dict(d: Mapping[str, Any]) -> GoldenItem:
    return _item(d, 1)
