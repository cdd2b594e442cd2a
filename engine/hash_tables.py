"""The manifest's per-node and per-file hashes: a base file plus the entries changed since.

At 100k chapters the node hashes alone were 12 MB of manifest JSON, read and rewritten by
every update (and the 100k small lists it decoded into cost more in garbage collection
than the parsing). Now a full build or a compaction writes them once, as columns of
strings, to ``hashes_<build>.json``; the manifest keeps only what changed since that base,
so an update reads the base (no per-entry containers) but writes a manifest in
proportion to its change. ``NodeHashes`` and ``FileHashes`` are read-only mappings over
base + changes; ``updated`` returns a new one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import orjson

V = TypeVar("V")

# Write a new base once the changes pass this share of the entries (and this many).
COMPACT_FRACTION = 0.05
COMPACT_MIN_ENTRIES = 1000


class _Packed(Mapping[str, V], Generic[V]):
    """key -> value over base columns (``keys`` and value columns) and changes."""

    def __init__(
        self,
        keys: list[str],
        columns: Sequence[list[str]],
        base_file: str = "",
        changed: Mapping[str, V] | None = None,
        removed: frozenset[str] = frozenset(),
    ) -> None:
        self._keys = keys
        self._columns = tuple(columns)
        self.base_file = base_file  # "" = not saved as a base file (written inline)
        self.changed: dict[str, V] = dict(changed or {})
        self.removed = removed  # base keys gone
        self._index: dict[str, int] | None = None
        self._key_set: frozenset[str] | None = None

    def _value(self, i: int) -> V:
        raise NotImplementedError

    def _base_index(self) -> dict[str, int]:
        if self._index is None:
            self._index = dict(zip(self._keys, range(len(self._keys)), strict=True))
        return self._index

    def __getitem__(self, key: str) -> V:
        hit = self.changed.get(key)
        if hit is not None:
            return hit
        if key in self.removed:
            raise KeyError(key)
        return self._value(self._base_index()[key])

    def get(self, key: str, default: Any = None) -> Any:
        hit = self.changed.get(key)
        if hit is not None:
            return hit
        if key in self.removed:
            return default
        i = (self._index if self._index is not None else self._base_index()).get(key)
        return default if i is None else self._value(i)

    def as_dict(self) -> dict[str, V]:
        """A plain dict of every entry (built in C from the base columns)."""
        out = dict(zip(self._keys, self._base_values(), strict=True))
        for k in self.removed:
            del out[k]
        out.update(self.changed)
        return out

    def _base_values(self) -> Iterable[V]:
        raise NotImplementedError

    def __contains__(self, key: object) -> bool:
        if key in self.changed:
            return True
        return key not in self.removed and key in self._base_index()

    def __len__(self) -> int:
        if not self.changed and not self.removed:
            return len(self._keys)  # without building the index (1M entries at 1M chapters)
        index = self._base_index()
        return len(self._keys) - len(self.removed) + sum(1 for k in self.changed if k not in index)

    def __iter__(self) -> Iterator[str]:
        changed, removed = self.changed, self.removed
        for k in self._keys:
            if k not in removed and k not in changed:
                yield k
        yield from changed

    def key_set(self) -> frozenset[str]:
        """Every key, as a set (one C pass over the base)."""
        if self._key_set is None:
            base = set(self._keys)
            base.difference_update(self.removed)
            base.update(self.changed)
            self._key_set = frozenset(base)
        return self._key_set

    @property
    def changes(self) -> int:
        return len(self.changed) + len(self.removed)

    def needs_base(self) -> bool:
        """Whether to save these entries as a new base (none yet, or many changes)."""
        if not self.base_file:
            return True
        return self.changes > max(COMPACT_MIN_ENTRIES, COMPACT_FRACTION * len(self._keys))

    def _updated(self, changes: Mapping[str, V | None]) -> tuple[dict[str, V], frozenset[str]]:
        changed = dict(self.changed)
        removed = set(self.removed)
        index = self._base_index()
        for k, v in changes.items():
            i = index.get(k)
            if v is None:
                changed.pop(k, None)
                if i is not None:
                    removed.add(k)
            elif i is not None and self._value(i) == v:
                changed.pop(k, None)
                removed.discard(k)
            else:
                changed[k] = v
                removed.discard(k)
        return changed, frozenset(removed)

    def diff(self, to: Mapping[str, V]) -> dict[str, V | None]:
        """The changes that make these entries equal ``to``."""
        now = self.as_dict()
        out: dict[str, V | None] = {k: v for k, v in to.items() if now.get(k) != v}
        for k in now.keys() - to.keys():
            out[k] = None
        return out


class NodeHashes(_Packed[tuple[str, str]]):
    """node id -> (embed hash, row hash)."""

    base_fingerprint: int | None = None  # of the base entries, when the base file gives it

    def _value(self, i: int) -> tuple[str, str]:
        return self._columns[0][i], self._columns[1][i]

    def _base_values(self) -> Iterable[tuple[str, str]]:
        return zip(self._columns[0], self._columns[1], strict=True)

    def _with(
        self, base_file: str, changed: dict[str, tuple[str, str]], removed: frozenset[str]
    ) -> NodeHashes:
        out = NodeHashes(self._keys, self._columns, base_file, changed, removed)
        out.base_fingerprint, out._index = self.base_fingerprint, self._index
        return out

    def fingerprint(self) -> str:
        """One hash over every entry, whatever its order and however stored: the XOR of
        the entries' own hashes, so an update adjusts the base's in proportion to its
        changes."""
        if self.base_fingerprint is None:
            acc = 0
            for k, a, b in zip(self._keys, *self._columns, strict=True):
                acc ^= _entry_hash(k, a, b)
            self.base_fingerprint = acc
        acc = self.base_fingerprint
        index = self._base_index()
        for k in {*self.changed, *self.removed}:
            i = index.get(k)
            if i is not None:
                acc ^= _entry_hash(k, *self._value(i))
            v = self.changed.get(k)
            if v is not None:
                acc ^= _entry_hash(k, v[0], v[1])
        return f"{acc:032x}"[:16]

    @classmethod
    def of(cls, nodes: Mapping[str, Sequence[str]]) -> NodeHashes:
        if isinstance(nodes, NodeHashes):
            return nodes
        keys = list(nodes)
        vals = list(nodes.values())
        return cls(keys, ([v[0] for v in vals], [v[1] for v in vals]))

    def updated(self, changes: Mapping[str, Sequence[str] | None]) -> NodeHashes:
        pairs = {k: None if v is None else (v[0], v[1]) for k, v in changes.items()}
        changed, removed = self._updated(pairs)
        return self._with(self.base_file, changed, removed)

    def rebased(self, base_file: str) -> NodeHashes:
        """The same entries as a base saved to ``base_file`` (no changes)."""
        if not self.changes:
            return self._with(base_file, {}, frozenset())
        keys = list(self)
        vals = [self[k] for k in keys]
        return NodeHashes(keys, ([v[0] for v in vals], [v[1] for v in vals]), base_file)

    def base_columns(self) -> dict[str, list[str]]:
        return {"ids": self._keys, "embed": self._columns[0], "row": self._columns[1]}


class FileHashes(_Packed[str]):
    """rel path -> source hash of the file's bytes."""

    def _value(self, i: int) -> str:
        return self._columns[0][i]

    def _base_values(self) -> Iterable[str]:
        return self._columns[0]

    @classmethod
    def of(cls, files: Mapping[str, str]) -> FileHashes:
        if isinstance(files, FileHashes):
            return files
        return cls(list(files), (list(files.values()),))

    def updated(self, changes: Mapping[str, str | None]) -> FileHashes:
        changed, removed = self._updated(changes)
        return FileHashes(self._keys, self._columns, self.base_file, changed, removed)

    def rebased(self, base_file: str) -> FileHashes:
        if not self.changes:
            return FileHashes(self._keys, self._columns, base_file)
        keys = list(self)
        return FileHashes(keys, ([self[k] for k in keys],), base_file)

    def base_columns(self) -> dict[str, list[str]]:
        return {"paths": self._keys, "hashes": self._columns[0]}


def _entry_hash(key: str, a: str, b: str) -> int:
    digest = hashlib.blake2b(f"{key}\x00{a}\x00{b}".encode(), digest_size=16).digest()
    return int.from_bytes(digest, "big")


def base_payload(nodes: NodeHashes, files: FileHashes) -> bytes:
    """The base file of both tables (columns of strings: quick to decode)."""
    nodes.fingerprint()  # computes the base's (no changes: it is the base's)
    return orjson.dumps(
        {
            "nodes": nodes.base_columns(),
            "files": files.base_columns(),
            "fingerprint": f"{nodes.base_fingerprint:x}",
        }
    )


def read_base(payload: bytes, base_file: str) -> tuple[NodeHashes, FileHashes]:
    data: dict[str, Any] = orjson.loads(payload)
    n, f = data["nodes"], data["files"]
    if not (len(n["ids"]) == len(n["embed"]) == len(n["row"])) or len(f["paths"]) != len(
        f["hashes"]
    ):
        raise ValueError("the hash columns differ in length")
    nodes = NodeHashes(n["ids"], (n["embed"], n["row"]), base_file)
    if "fingerprint" in data:
        nodes.base_fingerprint = int(data["fingerprint"], 16)
    return nodes, FileHashes(f["paths"], (f["hashes"],), base_file)


def with_changes(
    nodes: NodeHashes,
    files: FileHashes,
    nodes_changed: Mapping[str, Sequence[str]],
    nodes_removed: Sequence[str],
    files_changed: Mapping[str, str],
    files_removed: Sequence[str],
) -> tuple[NodeHashes, FileHashes]:
    """The base tables with the changes a manifest records."""
    n = nodes._with(
        nodes.base_file,
        {k: (v[0], v[1]) for k, v in nodes_changed.items()},
        frozenset(nodes_removed),
    )
    f = FileHashes(
        files._keys, files._columns, files.base_file, dict(files_changed), frozenset(files_removed)
    )
    return n, f
