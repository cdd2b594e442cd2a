"""LanceDB storage of chapter rows, plus the small side files an index keeps beside them.

This and ``engine.ann`` (the approximate vector index) are the only modules that touch
lancedb. An index lives at a folder or any URI that LanceDB accepts (``s3://bucket/prefix``
with ``storage_options``). Beside the tables it holds ``manifest.json`` (which table and
version is current) and caches (BM25 counts, the expansion vocabulary); ``Location`` reads
and writes those, atomically on a local disk (temp file + rename) and by single-object PUT
on an object store.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO, Protocol
from urllib.parse import urlparse

import lancedb
import numpy as np
import pyarrow as pa

from engine.atomic import atomic_write_bytes, atomic_writer
from engine.errors import EngineError

TABLE_PREFIX = "chapters_"
PASSAGES = "passage_vectors"
FILTER_KEYS = ("category", "priority", "doc_type", "keywords")

META_COLUMNS = (
    "id",
    "doc_id",
    "title",
    "level",
    "ordinal",
    "parent_id",
    "breadcrumb",
    "file_path",
    "line",
    "anchor",
    "category",
    "priority",
    "doc_type",
    "keywords",
    "content_hash",
    "row_hash",
)


class ChapterTable(Protocol):
    """The LanceDB table operations the engine uses (``lancedb.table.Table`` has them all).

    Query builders stay ``Any``: their chain (``where``, ``select``, ``nprobes``, ...) differs
    between LanceDB's vector, full-text and plain queries, and the engine calls few of them.
    """

    @property
    def schema(self) -> pa.Schema: ...

    @property
    def version(self) -> int: ...

    def checkout(self, version: int) -> None: ...

    def restore(self, version: int | None = None) -> None: ...

    def count_rows(self, filter: str | None = None) -> int: ...

    def add(self, data: pa.Table) -> object: ...

    def merge_insert(self, on: str) -> Any: ...

    def delete(self, where: str) -> object: ...

    def create_index(self, column: str, /, *, config: Any, replace: bool = True) -> None: ...

    def search(
        self, query: np.ndarray | None = None, vector_column_name: str | None = None
    ) -> Any: ...


def chapter_schema(dims: int) -> pa.Schema:
    """One row per chapter node: the embedded text, its vector, its tokens and metadata."""
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dims)),
            # The chapter's passage vectors (index.passage_chars; engine/passages.py), in
            # passage order; empty when passages are off or the chapter has no text.
            pa.field(PASSAGES, pa.list_(pa.list_(pa.float32(), dims))),
            pa.field("text", pa.string()),
            pa.field("tokens", pa.string()),  # jieba tokens, space-joined (BM25 input)
            pa.field("doc_id", pa.string()),
            pa.field("title", pa.string()),
            pa.field("level", pa.int32()),
            pa.field("ordinal", pa.int32()),
            pa.field("parent_id", pa.string()),
            pa.field("breadcrumb", pa.string()),  # JSON list of titles
            pa.field("file_path", pa.string()),
            pa.field("line", pa.int32()),
            pa.field("anchor", pa.string()),
            pa.field("category", pa.string()),
            pa.field("priority", pa.string()),
            pa.field("doc_type", pa.string()),
            # A list rather than JSON text so filters can use array_has_any() in SQL.
            pa.field("keywords", pa.list_(pa.string())),
            pa.field("content_hash", pa.string()),  # hash of the embedded text
            pa.field("row_hash", pa.string()),  # hash of everything else in the row
        ]
    )


def is_local(uri: str) -> bool:
    scheme = urlparse(str(uri)).scheme
    return scheme in ("", "file") or len(scheme) == 1  # "C:\\..." on Windows


def _local_path(uri: str) -> Path:
    parsed = urlparse(str(uri))
    return Path(parsed.path) if parsed.scheme == "file" else Path(str(uri))


class Location:
    """Named side files (manifest, caches) stored beside the LanceDB tables."""

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = str(uri)
        self.storage_options = dict(storage_options or {})
        self._fs: Any = None
        self._root = ""
        if is_local(self.uri):
            self._dir: Path | None = _local_path(self.uri)
        else:
            self._dir = None
            self._fs, self._root = _pyarrow_fs(self.uri, self.storage_options)

    def read_bytes(self, name: str) -> bytes | None:
        if self._dir is not None:
            p = self._dir / name
            return p.read_bytes() if p.is_file() else None
        try:
            with self._fs.open_input_stream(f"{self._root}/{name}") as fh:
                return fh.read()  # type: ignore[no-any-return]
        except (FileNotFoundError, OSError):
            return None

    @contextlib.contextmanager
    def writer(self, name: str) -> Iterator[BinaryIO]:
        """Write ``name`` piece by piece: atomically in a folder (engine/atomic.py), as one
        new object on an object store (a PUT replaces the object as a whole)."""
        if self._dir is not None:
            with atomic_writer(self._dir / name) as fh:
                yield fh
            return
        with self._fs.open_output_stream(f"{self._root}/{name}") as out:
            yield out

    def read_text(self, name: str) -> str | None:
        data = self.read_bytes(name)
        return None if data is None else data.decode("utf-8")

    def write_bytes(self, name: str, data: bytes) -> None:
        if self._dir is not None:
            atomic_write_bytes(self._dir / name, data)
            return
        # An object-store PUT replaces the object as a whole: readers see old or new.
        with self._fs.open_output_stream(f"{self._root}/{name}") as fh:
            fh.write(data)

    def write_text(self, name: str, text: str) -> None:
        self.write_bytes(name, text.encode("utf-8"))

    def delete(self, name: str) -> None:
        if self._dir is not None:
            with contextlib.suppress(FileNotFoundError):
                (self._dir / name).unlink()
            return
        with contextlib.suppress(FileNotFoundError, OSError):
            self._fs.delete_file(f"{self._root}/{name}")

    def names(self) -> list[str]:
        """Plain files directly in the location (not the tables' folders)."""
        if self._dir is not None:
            if not self._dir.is_dir():
                return []
            return sorted(
                p.name for p in self._dir.iterdir() if p.is_file() and not p.name.startswith(".")
            )
        import pyarrow.fs as pafs

        sel = pafs.FileSelector(self._root, allow_not_found=True, recursive=False)
        infos = self._fs.get_file_info(sel)
        return sorted(
            i.base_name
            for i in infos
            if i.type == pafs.FileType.File and not i.base_name.startswith(".")
        )

    @contextlib.contextmanager
    def exclusive(self, name: str = ".build.lock") -> Iterator[None]:
        """Hold an inter-process lock while building (local folders; object stores: none).

        ``flock`` is released by the OS when the holder dies, so a crash leaves no stale lock.
        """
        if self._dir is None:
            yield
            return
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            yield
            return
        self._dir.mkdir(parents=True, exist_ok=True)
        with open(self._dir / name, "a+b") as fh:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _pyarrow_fs(uri: str, options: Mapping[str, str]) -> tuple[Any, str]:
    """A pyarrow filesystem for an object-store URI, from LanceDB-style storage options."""
    import pyarrow.fs as pafs

    parsed = urlparse(uri)
    root = (parsed.netloc + parsed.path).rstrip("/")
    if parsed.scheme not in ("s3", "s3a"):
        fs, path = pafs.FileSystem.from_uri(uri)
        return fs, path.rstrip("/")
    opts = {k.lower(): v for k, v in options.items()}

    def pick(*keys: str) -> str | None:
        return next((str(opts[k]) for k in keys if opts.get(k)), None)

    kwargs: dict[str, Any] = {}
    if key := pick("aws_access_key_id", "access_key_id"):
        kwargs["access_key"] = key
    if secret := pick("aws_secret_access_key", "secret_access_key"):
        kwargs["secret_key"] = secret
    if token := pick("aws_session_token", "session_token", "token"):
        kwargs["session_token"] = token
    if region := pick("region", "aws_region", "aws_default_region"):
        kwargs["region"] = region
    if endpoint := pick("endpoint", "aws_endpoint", "endpoint_url", "aws_endpoint_url"):
        ep = urlparse(endpoint)
        kwargs["endpoint_override"] = ep.netloc or endpoint
        kwargs["scheme"] = ep.scheme or "https"
    if pick("aws_virtual_hosted_style_request", "virtual_hosted_style_request") == "true":
        kwargs["force_virtual_addressing"] = True
    return pafs.S3FileSystem(**kwargs), root


class Store:
    """A LanceDB connection with the few table operations the indexer and engine need."""

    def __init__(self, uri: str, storage_options: Mapping[str, str] | None = None) -> None:
        self.uri = str(uri)
        self.storage_options = dict(storage_options or {})
        try:
            self.db = lancedb.connect(self.uri, storage_options=self.storage_options or None)
        except Exception as exc:  # lancedb raises plain ValueError/OSError/RuntimeError
            raise EngineError(
                f"cannot open the index at {self.uri}: {exc}; check --index and storage options"
            ) from exc

    def table_names(self) -> list[str]:
        names: list[str] = []
        token = None
        while True:
            resp = self.db.list_tables(page_token=token)
            names.extend(resp.tables)
            token = resp.page_token
            if not token:
                return sorted(names)

    def create_table(self, name: str, dims: int) -> ChapterTable:
        return self.db.create_table(name, schema=chapter_schema(dims))

    def open_table(self, name: str, version: int | None = None) -> ChapterTable:
        tbl = self.db.open_table(name)
        if version is not None and tbl.version != version:
            tbl.checkout(version)
        return tbl

    def drop_table(self, name: str) -> None:
        # LanceDBConnection takes ignore_missing; the DBConnection base it is typed as does not.
        self.db.drop_table(name, ignore_missing=True)  # type: ignore[call-arg]

    @staticmethod
    def add(tbl: ChapterTable, rows: Sequence[Mapping[str, Any]]) -> None:
        if rows:
            tbl.add(_to_arrow(rows, tbl.schema))

    @staticmethod
    def upsert(tbl: ChapterTable, rows: Sequence[Mapping[str, Any]]) -> None:
        """Insert new ids, replace existing ones (merge_insert on "id")."""
        if rows:
            (
                tbl.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(_to_arrow(rows, tbl.schema))
            )

    @staticmethod
    def add_columns(
        tbl: ChapterTable,
        columns: pa.Table,
        vectors: np.ndarray,
        passages: Sequence[np.ndarray] | None = None,
    ) -> None:
        """Append rows given as every column but the vectors, plus a (rows, dims) matrix and
        each row's (passages, dims) matrix (None: no passages)."""
        if columns.num_rows:
            tbl.add(with_vectors(columns, vectors, tbl.schema, passages))

    @staticmethod
    def upsert_columns(
        tbl: ChapterTable,
        columns: pa.Table,
        vectors: np.ndarray,
        passages: Sequence[np.ndarray] | None = None,
    ) -> None:
        """``upsert`` for rows given as in ``add_columns``."""
        if columns.num_rows:
            (
                tbl.merge_insert("id")
                .when_matched_update_all()
                .when_not_matched_insert_all()
                .execute(with_vectors(columns, vectors, tbl.schema, passages))
            )

    @staticmethod
    def delete_ids(tbl: ChapterTable, ids: Iterable[str], chunk: int = 500) -> None:
        todo = list(ids)
        for start in range(0, len(todo), chunk):
            tbl.delete(f"id IN ({', '.join(sql_str(i) for i in todo[start : start + chunk])})")

    @staticmethod
    def read(
        tbl: ChapterTable, columns: Sequence[str] | None = None, where: str | None = None
    ) -> pa.Table:
        """Rows of the (checked-out) table version, all or the ``columns`` named."""
        q = tbl.search()
        if where:
            q = q.where(where)
        if columns:
            q = q.select(list(columns))
        return q.limit(None).to_arrow()

    @staticmethod
    def read_batches(
        tbl: ChapterTable, columns: Sequence[str], batch_rows: int
    ) -> Iterator[pa.RecordBatch]:
        """``read``'s rows as a stream of record batches (at most ``batch_rows`` each), for
        columns too large to hold twice."""
        reader = tbl.search().select(list(columns)).limit(None).to_batches(batch_rows)
        yield from reader

    @staticmethod
    def vector_search(
        tbl: ChapterTable, vector: np.ndarray, k: int, where: str | None = None
    ) -> list[tuple[str, float]]:
        """Exact (flat) cosine search in LanceDB: (id, cosine similarity), best first."""
        if k <= 0:
            return []
        q = tbl.search(
            np.asarray(vector, dtype=np.float32), vector_column_name="vector"
        ).distance_type("cosine")
        if where:
            q = q.where(where, prefilter=True)
        res = q.select(["id", "_distance"]).limit(k).to_arrow()
        ids = res.column("id").to_pylist()
        dist = res.column("_distance").to_numpy()
        pairs = [(i, 1.0 - float(d)) for i, d in zip(ids, dist, strict=True)]
        pairs.sort(key=lambda p: (-p[1], p[0]))
        return pairs


def sql_str(value: str) -> str:
    """A SQL string literal (single quotes doubled)."""
    return "'" + str(value).replace("'", "''") + "'"


def filter_sql(filters: Mapping[str, Sequence[str]] | None) -> str | None:
    """LanceDB WHERE clause for normalised filters (key -> accepted values), or None."""
    if not filters:
        return None
    parts = []
    for key, values in sorted(filters.items()):
        if key not in FILTER_KEYS:
            raise EngineError(f"unknown filter {key!r}; filter on {', '.join(FILTER_KEYS)}")
        vals = ", ".join(sql_str(v) for v in values)
        if key == "keywords":
            parts.append(f"array_has_any(keywords, [{vals}])")
        else:
            parts.append(f"{key} IN ({vals})")
    return " AND ".join(parts)


def vectors_of(table: pa.Table, column: str = "vector") -> np.ndarray:
    """The fixed-size-list vector column as a float32 (rows, dims) matrix."""
    col = table.column(column).combine_chunks()
    dims = col.type.list_size
    flat = col.values.to_numpy(zero_copy_only=False)
    return np.asarray(flat, dtype=np.float32).reshape(len(col), dims)


def _skip_shadowed_datasets() -> None:
    """Forget a ``datasets`` module that is not Hugging Face's before lancedb writes.

    The repo's own ``datasets/`` folder (golden sets) is importable as a namespace package
    whenever the repo root is on sys.path (pytest, ``python -c``); sentence-transformers
    then imports it, and lancedb's first write sees "datasets" in sys.modules and fails
    on ``from datasets import Dataset``. That module is a folder of YAML files, not code
    anyone uses, so it is dropped from sys.modules (lancedb's own state is left alone); an
    installed Hugging Face ``datasets`` (it has ``Dataset``) is kept.
    """
    mod = sys.modules.get("datasets")
    if mod is not None and not hasattr(mod, "Dataset"):
        del sys.modules["datasets"]


def with_vectors(
    columns: pa.Table,
    vectors: np.ndarray,
    schema: pa.Schema,
    passages: Sequence[np.ndarray] | None = None,
) -> pa.Table:
    """The table of ``schema`` from its non-vector ``columns``, a float32 vector matrix and
    the rows' passage matrices (a table made before passages has no column for them)."""
    _skip_shadowed_datasets()
    if len(vectors) != columns.num_rows:
        raise ValueError(f"{len(vectors)} vectors for {columns.num_rows} rows")
    dims = schema.field("vector").type.list_size
    mat = np.ascontiguousarray(vectors, dtype=np.float32).reshape(columns.num_rows, dims)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(mat.ravel(), pa.float32()), dims)
    made = {"vector": vec}
    if PASSAGES in schema.names:
        made[PASSAGES] = passage_array(passages, columns.num_rows, dims)
    cols = [made[f.name] if f.name in made else columns.column(f.name).cast(f.type) for f in schema]
    return pa.Table.from_arrays(cols, schema=schema)


def passage_array(passages: Sequence[np.ndarray] | None, rows: int, dims: int) -> pa.ListArray:
    """Each row's (k, dims) passage matrix as one list-of-vectors array (None: all empty)."""
    if passages is None:
        passages = [np.zeros((0, dims), np.float32)] * rows
    if len(passages) != rows:
        raise ValueError(f"{len(passages)} passage matrices for {rows} rows")
    offsets = np.zeros(rows + 1, dtype=np.int32)
    offsets[1:] = np.cumsum([len(p) for p in passages])
    flat = (
        np.concatenate([np.asarray(p, np.float32).reshape(-1, dims) for p in passages])
        if rows
        else np.zeros((0, dims), np.float32)
    )
    values = pa.FixedSizeListArray.from_arrays(pa.array(flat.ravel(), pa.float32()), dims)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values)


def passages_of(table: pa.Table) -> list[np.ndarray]:
    """The passage column of ``table`` as one (k, dims) float32 matrix per row."""
    col = table.column(PASSAGES).combine_chunks()
    dims = col.type.value_type.list_size
    flat = col.flatten().flatten().to_numpy(zero_copy_only=False)
    mat = np.asarray(flat, dtype=np.float32).reshape(-1, dims)
    offsets = col.offsets.to_numpy() - col.offsets[0].as_py()
    return [mat[offsets[i] : offsets[i + 1]] for i in range(len(col))]


def _to_arrow(rows: Sequence[Mapping[str, Any]], schema: pa.Schema) -> pa.Table:
    _skip_shadowed_datasets()
    cols: dict[str, Any] = {}
    for f in schema:
        values = [r.get(f.name) for r in rows]
        if f.name == "vector":
            mat = np.asarray(np.stack([np.asarray(v) for v in values]), dtype=np.float32)
            cols[f.name] = pa.FixedSizeListArray.from_arrays(
                pa.array(mat.ravel(), pa.float32()), f.type.list_size
            )
        else:
            cols[f.name] = pa.array(values, type=f.type)
    return pa.table(cols, schema=schema)
