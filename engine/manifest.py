"""``manifest.json``: what an index folder holds now, read and written as one JSON object.

The manifest names the current table *and version*, the embedder signature, one hash pair
per node, every indexed file's source hash and the cache files of that exact build. The
hashes live in a base file it names plus the entries changed since (engine/hash_tables.py),
so an update writes a manifest in proportion to its change. Writing it (atomically, last)
is the switch-over of every build; readers load exactly what it names, so a build in
progress never shows.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

import orjson

from engine.errors import EngineError, IndexMissingError
from engine.hash_tables import FileHashes, NodeHashes, read_base, with_changes
from engine.store import Location
from engine.types import EmbedderSignature
from engine.yaml_safe import short

MANIFEST = "manifest.json"
SUMMARIES = "summaries.json"  # LLM chapter summaries (workbench/answer/summaries.py writes it)
MANIFEST_FORMAT = 1
# The manifest fields checked on read, by their annotation (the hashes are checked where
# they are rebuilt, engine/hash_tables.py).
_FIELD_TYPES: dict[str, type] = {"str": str, "int": int, "dict[str, Any]": dict}
_FIELD_TYPES["dict[str, str]"] = dict


@dataclass(frozen=True)
class Manifest:
    """What ``manifest.json`` records about the current index."""

    table: str
    version: int
    signature: dict[str, Any]  # EmbedderSignature.to_dict()
    tokenizer: str
    content_chars: int
    # node_id -> [embed hash, row hash]; saved as a base file + changes (engine/hash_tables.py)
    nodes: Mapping[str, Sequence[str]]
    kb_fingerprint: str
    created_at: str
    updated_at: str
    build_id: str  # names this exact table version and its caches
    lexical_file: str = ""
    crumbs_file: str = ""  # the BM25 title field's counts over its own terms (for updates)
    vocab_terms_file: str = ""
    vocab_vectors_file: str = ""
    # The counts as base + delta (engine/lexical_delta.py): ``lexical_file`` and
    # ``crumbs_file`` are the base, this its df and title terms, and the delta the rows
    # changed since ("" = none). Absent in indexes written before: their first update
    # writes a base.
    lexical_stats_file: str = ""
    lexical_delta_file: str = ""
    summaries: dict[str, str] = field(default_factory=dict)  # LLM summaries used, by content hash
    format: int = MANIFEST_FORMAT
    # For updates in proportion to the change: the source hash of every indexed file (its
    # nodes' hashes are reused while it is unchanged and ``hash_context`` holds), and how
    # many rows give each title/keyword term (the vocabulary keeps those terms; an index
    # with ``lexical_stats_file`` keeps them there and in the delta instead: None here).
    files: Mapping[str, str] = field(default_factory=dict)
    hash_context: str = ""
    title_terms: dict[str, int] | None = None
    vector_index: str = ""  # the approximate vector index ("" = exact search in memory)

    def header(self) -> Manifest:
        """This manifest without its per-chapter maps (node hashes, file hashes): what a
        serving snapshot keeps. They were ~58 MB of Python objects at 100k chapters; the
        freshness check and updates read the whole manifest from disk when they need them."""
        return replace(self, nodes={}, files={})

    @property
    def embedder_signature(self) -> EmbedderSignature:
        return EmbedderSignature(**self.signature)

    def to_json(self) -> str:
        return self.to_json_bytes().decode("utf-8")

    @property
    def hashes_file(self) -> str:
        """The base file of the node and file hashes ("" when the manifest holds them)."""
        nodes = self.nodes
        return nodes.base_file if isinstance(nodes, NodeHashes) else ""

    def to_json_bytes(self) -> bytes:
        # Not asdict(): it deep-copies every node's hash pair. orjson, not json: at 100k
        # nodes json took 0.6 s to write and as long to read, once per update each.
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        nodes, files = self.nodes, self.files
        base = self.hashes_file
        if base and isinstance(files, FileHashes) and files.base_file == base:
            assert isinstance(nodes, NodeHashes)  # hashes_file says so
            del data["nodes"], data["files"]
            data |= {
                "hashes_file": base,
                "nodes_changed": nodes.changed,
                "nodes_removed": sorted(nodes.removed),
                "files_changed": files.changed,
                "files_removed": sorted(files.removed),
            }
        else:  # written whole, as before the base files
            data["nodes"] = {k: list(v) for k, v in nodes.items()}
            data["files"] = dict(files)
        return orjson.dumps(data, option=orjson.OPT_SORT_KEYS)

    @classmethod
    def from_json(
        cls, text: str | bytes, read: Callable[[str], bytes | None] | None = None
    ) -> Manifest:
        """The manifest in ``text``; ``read(name)`` gives the hashes base file it names."""
        data = orjson.loads(text)
        if not isinstance(data, dict):
            raise TypeError(f"expected a JSON object, got {type(data).__name__}")
        base = data.pop("hashes_file", "")
        if base:
            payload = read(base) if read is not None else None
            if payload is None:
                raise MissingBaseError(f"{base}, which holds the node hashes, is missing")
            nodes, files = read_base(payload, base)
            data["nodes"], data["files"] = with_changes(
                nodes,
                files,
                data.pop("nodes_changed", {}),
                data.pop("nodes_removed", []),
                data.pop("files_changed", {}),
                data.pop("files_removed", []),
            )
        else:  # a manifest written before the base files: every hash inline
            data["nodes"] = NodeHashes.of(data.get("nodes") or {})
            data["files"] = FileHashes.of(data.get("files") or {})
        known = {f for f in cls.__dataclass_fields__}
        for f in fields(cls):  # a hand-edited or foreign manifest: its types, not a traceback
            kind = _FIELD_TYPES.get(str(f.type))
            value = data.get(f.name)
            if (
                kind
                and f.name in data
                and (not isinstance(value, kind) or (kind is int and isinstance(value, bool)))
            ):
                raise TypeError(f"field {f.name!r} must be {kind.__name__}, got {short(value)}")
        return cls(**{k: v for k, v in data.items() if k in known})


class MissingBaseError(ValueError):
    """The hashes base file a manifest names is gone."""


def read_manifest(loc: Location) -> Manifest | None:
    """The manifest at ``loc`` (None when there is no index yet)."""
    data = loc.read_bytes(MANIFEST)
    if data is None:
        return None
    try:
        for _ in range(3):
            try:
                return Manifest.from_json(data, loc.read_bytes)
            except MissingBaseError:
                # A build switched the manifest and dropped the old base between our two
                # reads: read the new manifest (the same bytes again: really missing).
                again = loc.read_bytes(MANIFEST)
                if again is None or again == data:
                    raise
                data = again
        return Manifest.from_json(data, loc.read_bytes)
    except (ValueError, TypeError, KeyError) as exc:
        raise EngineError(
            f"{loc.uri}/{MANIFEST} is unreadable ({exc}); rebuild with `wikirag index --force`"
        ) from exc


def require_manifest(loc: Location, kb_hint: str = "DIR") -> Manifest:
    """The manifest at ``loc``; IndexMissingError saying how to build one when absent."""
    m = read_manifest(loc)
    if m is None:
        raise IndexMissingError(f"no index at {loc.uri}; run `wikirag index --kb {kb_hint}`")
    return m


def write_manifest(loc: Location, manifest: Manifest) -> None:
    """The switch-over: one atomic write makes ``manifest``'s table version current."""
    loc.write_bytes(MANIFEST, manifest.to_json_bytes())


def load_llm_summaries(loc: Location) -> dict[str, str]:
    """``summaries.json`` beside the index ({} when absent): content hash -> summary."""
    text = loc.read_text(SUMMARIES)
    if text is None:
        return {}
    try:
        data = json.loads(text)
        entries = data.get("summaries", {})
        return {k: str(v["summary"]) for k, v in entries.items() if v.get("summary")}
    except (ValueError, AttributeError, KeyError, TypeError) as exc:
        raise EngineError(
            f"{loc.uri}/{SUMMARIES} is unreadable ({exc}); delete it or rerun the summaries"
        ) from exc


def now_stamp() -> str:
    """UTC time as the manifest records it (microseconds, so updates within a second differ)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
