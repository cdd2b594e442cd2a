"""What a config saved before a key existed meant: the key's value of that time.

``EngineConfig.from_dict`` fills these into a complete saved config that lacks them, so an
accepted baseline keeps ranking as it did when it was accepted.
"""

from __future__ import annotations

from typing import Any

# Keys added after configs were first saved, with the value that reproduces what a config
# written before them meant. A saved config lists every key of its time, so one that has
# the whole first-release schema but lacks these was written before they existed: the
# bundled wiki's accepted baseline ran RRF over plain BM25, and must keep doing so until an
# experiment changes it. A hand-written partial config gets today's defaults.
# (embedding.provider is not here although its default moved from "use" to "use-onnx": it is
# in the first schema, so every saved config names its embedder and keeps it.)
LEGACY_VALUES: dict[str, Any] = {
    "fusion.method": "rrf",
    "fusion.normalization": "minmax",
    "fusion.cross_lingual_bm25": 1.0,
    "lexical.title_weight": 0.0,
    "lexical.title_b": 0.75,
    "index.ann_min_rows": 0,
    "index.passage_chars": 0,
    "search.exact_vector_rows": 0,
    # Not a new key, a changed default: every config saved since the key existed names it,
    # so only the ones from before lack it, and they were unstemmed.
    "lexical.stem": False,
}
_FIRST_SCHEMA = {
    "embedding": ("provider", "model", "dims", "batch_size", "base_url", "api_key_env"),
    "lexical": ("k1", "b", "tokenizer", "backend"),
    "expansion": ("enabled", "threshold", "max_terms", "use_fallback_dictionary"),
    "fusion": ("k", "vector_weight", "bm25_weight", "multiplier", "rerank_multiplier"),
    "search": ("mode", "top_k", "expand"),
}


def fill_legacy(data: Any) -> Any:
    """A complete config saved before LEGACY_VALUES' keys existed gets their old values."""
    if not isinstance(data, dict):
        return data
    complete = all(
        isinstance(data.get(sec), dict) and all(k in data[sec] for k in keys)
        for sec, keys in _FIRST_SCHEMA.items()
    )
    if not complete:
        return data
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for dotted, value in LEGACY_VALUES.items():
        section, key = dotted.split(".")
        out[section].setdefault(key, value)
    return out
