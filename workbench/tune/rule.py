"""The acceptance rule as data: presets, `experiments/<kb>/rule.yaml`, validation.

Two methods (docs/design.md, "The acceptance rule"):

- ``statistical`` (default): the primary measure must improve significantly (paired
  bootstrap CI low > 0 or randomization p < alpha), losses must not significantly
  outnumber wins (sign test), no slice with enough queries significantly worse
  (Holm-corrected), p50 latency within a bound, holdout not significantly worse. It scales
  with the set: on 757 queries 4 losses are noise, on 20 they are not.
- ``strict``: the reference engine's absolute thresholds (Recall@5 delta >= +0.01, <= 2
  regressed queries, none by > 0.2, ...). Meant for sets under ~50 queries, where the
  statistical tests have little power.

rule.yaml names a preset and overrides some of its keys::

    preset: statistical
    primary: mrr
    alpha: 0.05
    min_slice_size: 20
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.errors import EngineError
from engine.yaml_safe import load_file, short
from workbench.eval.measures import primary_measures

METHODS = ("statistical", "strict")
CORRECTIONS = ("holm", "bh", "none")
SLICE_FIELDS = ("difficulty", "category", "language")
RULE_FILE = "rule.yaml"


@dataclass(frozen=True)
class AcceptanceRule:
    """Every criterion of the accept/rollback decision; which ones apply depends on ``method``."""

    name: str = "statistical"  # where it came from, for display: "strict (experiments/x/rule.yaml)"
    preset: str = "statistical"  # the preset a rule.yaml started from
    method: str = "statistical"
    primary: str = "mrr"  # measured choice: README "Experiments: accept or roll back"
    alpha: float = 0.05
    # statistical
    sign_test: bool = True
    slice_by: tuple[str, ...] = SLICE_FIELDS
    min_slice_size: int = 20  # smaller slices have no power after correction
    correction: str = "holm"
    holdout_check: bool = True
    resamples: int = 10_000  # bootstrap resamples; the randomization test uses twice as many
    # both methods
    max_latency_delta_ms: float = 100.0
    # strict (the reference engine's absolute thresholds, kept for small sets)
    min_primary_delta: float = 0.01
    min_mrr_delta: float = -0.02
    min_hit5_delta: float = 0.0
    max_regressed_queries: int = 2
    max_query_regression: float = 0.2
    max_slice_regression: float = 0.05

    def __post_init__(self) -> None:
        _validate(self)

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys this rule's method reads (what `wikirag experiment rule` shows)."""
        common = ("method", "primary", "alpha", "max_latency_delta_ms")
        if self.method == "strict":
            return (
                *common,
                "min_primary_delta",
                "min_mrr_delta",
                "min_hit5_delta",
                "max_regressed_queries",
                "max_query_regression",
                "max_slice_regression",
                "min_slice_size",
                "slice_by",
            )
        return (
            *common,
            "sign_test",
            "slice_by",
            "min_slice_size",
            "correction",
            "holdout_check",
            "resamples",
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"preset": self.preset}
        for k in self.keys:
            v = getattr(self, k)
            out[k] = list(v) if isinstance(v, tuple) else v
        return out

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, allow_unicode=True)


def _validate(r: AcceptanceRule) -> None:
    def bad(key: str, why: str) -> EngineError:
        return EngineError(f"acceptance rule {r.name!r}: {key} {why}")

    if r.method not in METHODS:
        raise bad("method", f"must be one of {', '.join(METHODS)}, not {r.method!r}")
    if r.primary not in primary_measures():
        raise bad("primary", f"must be one of {', '.join(primary_measures())}, not {r.primary!r}")
    if not 0 < r.alpha <= 0.5:
        raise bad("alpha", f"must be in (0, 0.5], not {r.alpha}")
    if r.correction not in CORRECTIONS:
        raise bad("correction", f"must be one of {', '.join(CORRECTIONS)}, not {r.correction!r}")
    for s in r.slice_by:
        if s not in SLICE_FIELDS:
            raise bad("slice_by", f"entries must be among {', '.join(SLICE_FIELDS)}, not {s!r}")
    if r.min_slice_size < 1:
        raise bad("min_slice_size", f"must be at least 1, not {r.min_slice_size}")
    if r.resamples < 100:
        raise bad("resamples", f"must be at least 100, not {r.resamples}")
    if r.max_regressed_queries < 0:
        raise bad("max_regressed_queries", "must not be negative")


STATISTICAL = AcceptanceRule()
STRICT = AcceptanceRule(
    name="strict",
    preset="strict",
    method="strict",
    primary="recall@5",
    slice_by=("difficulty", "category"),
    min_slice_size=3,  # smaller slices are too noisy to veto a change
    holdout_check=False,
)
PRESETS = {"statistical": STATISTICAL, "strict": STRICT}

_FIELDS = {f.name: f for f in dataclasses.fields(AcceptanceRule)}
_KIND = {"bool": bool, "int": int, "float": float, "str": str}


def from_mapping(data: Any, source: str) -> AcceptanceRule:
    """A rule from a parsed rule.yaml: ``preset`` (default statistical) + overrides."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise EngineError(f"{source}: must be a mapping of rule keys, got {type(data).__name__}")
    data = dict(data)
    preset = data.pop("preset", "statistical")
    if preset not in PRESETS:
        raise EngineError(
            f"{source}: preset must be one of {', '.join(PRESETS)}, not {short(preset)}"
        )
    values: dict[str, Any] = {"name": f"{preset} ({source})", "preset": preset}
    for key, raw in data.items():
        if key == "name" or key not in _FIELDS:
            known = ", ".join(k for k in _FIELDS if k != "name")
            raise EngineError(f"{source}: unknown key {short(key)}; known keys: {known}")
        values[key] = _coerce(key, raw, source)
    return dataclasses.replace(PRESETS[preset], **values)


def _coerce(key: str, raw: Any, source: str) -> Any:
    kind = str(_FIELDS[key].type)
    if kind.startswith("tuple"):
        items = [raw] if isinstance(raw, str) else raw
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise EngineError(f"{source}: {key} must be a list of names, got {raw!r}")
        return tuple(items)
    want = _KIND[kind]
    ok = isinstance(raw, want) and not (want is not bool and isinstance(raw, bool))
    if want is float and isinstance(raw, int) and not isinstance(raw, bool):
        return float(raw)
    if not ok:
        raise EngineError(f"{source}: {key} must be a {kind}, got {short(raw)}")
    return raw


def load(path: str | Path) -> AcceptanceRule:
    path = Path(path)
    return from_mapping(load_file(path), str(path))


def resolve(experiments: str | Path, choice: str | None = None) -> AcceptanceRule:
    """``choice`` (a preset name or a file) if given, else rule.yaml if present, else statistical."""
    if choice:
        if choice in PRESETS:
            return PRESETS[choice]
        if not Path(choice).is_file():
            raise EngineError(
                f"--rule must be {' or '.join(PRESETS)} or an existing rule file, not {choice!r}"
            )
        return load(choice)
    own = Path(experiments) / RULE_FILE
    return load(own) if own.is_file() else STATISTICAL
