"""What `wikirag optimize` searches over: one parameter spec per config key, as data.

A spec names an ``EngineConfig`` key, its type, its range or choices, and when it is
active (e.g. the normalization only for convex fusion). ``available()`` keeps only the keys
the running ``EngineConfig`` has, so the space grows by itself as fusion methods or lexical
field weights are added to the config, and never proposes a key the config would reject.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.config import EngineConfig, all_keys, field_spec
from engine.fusion import FUSIONS, NORMALIZATIONS, MethodsReading

HYBRID = ("hybrid",)
LEXICAL_MODES = ("hybrid", "keyword")


@dataclass(frozen=True)
class ParamSpec:
    """One searched config key.

    ``kind``: float | int | categorical. ``step`` discretises a float: BM25 settings on a grid
    repeat across trials, so their (costly) keyword channel is computed once per grid point.
    ``when``: (key, allowed values) pairs that must all hold for the key to be searched;
    a condition on a key the config does not have holds (the only behaviour it knows).
    """

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    step: float | None = None
    log: bool = False
    # A registry (``FUSIONS``) or a live view of one is read on every use, so a registered
    # fusion method is searched with no change here.
    choices: Collection[Any] = ()
    when: tuple[tuple[str, Collection[Any]], ...] = ()
    why: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("float", "int", "categorical"):
            raise ValueError(f"{self.key}: kind must be float, int or categorical")
        if self.kind == "categorical" and not self.choices:
            raise ValueError(f"{self.key}: a categorical spec needs choices")
        if self.kind != "categorical" and (self.low is None or self.high is None):
            raise ValueError(f"{self.key}: a numeric spec needs low and high")
        if self.log and self.step is not None:
            raise ValueError(f"{self.key}: a log-scale range cannot have a step")

    def active(self, values: Mapping[str, Any], base: EngineConfig, known: set[str]) -> bool:
        """Whether this key is searched given the values chosen so far in this trial."""
        for key, allowed in self.when:
            if key not in known:
                continue
            value = values[key] if key in values else base.get(key)
            if value not in allowed:
                return False
        return True

    def suggest(self, trial: Any) -> Any:
        """Ask an Optuna trial for a value (the parameter is named by the config key)."""
        if self.kind == "categorical":
            return trial.suggest_categorical(self.key, list(self.choices))
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)  # type: ignore[arg-type]
        value = trial.suggest_float(
            self.key,
            float(self.low),  # type: ignore[arg-type]
            float(self.high),  # type: ignore[arg-type]
            step=self.step,
            log=self.log,
        )
        # low + n * step in floating point gives 2.9000000000000004; configs, logs and the
        # BM25 channel cache want the grid point itself.
        return round(value, 6) if self.step is not None else value

    def contains(self, value: Any) -> bool:
        """Whether ``value`` is a point of this spec's range (used to seed the baseline)."""
        if self.kind == "categorical":
            return value in self.choices
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        if not self.low <= value <= self.high:  # type: ignore[operator]
            return False
        if self.step is not None:
            n = (value - self.low) / self.step  # type: ignore[operator]
            return abs(n - round(n)) < 1e-9
        return self.kind != "int" or int(value) == value

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "kind": self.kind,
            "low": self.low,
            "high": self.high,
            "step": self.step,
            "log": self.log,
            "choices": list(self.choices),
            "when": {k: list(v) for k, v in self.when},
        }


SEARCH_SPACE: tuple[ParamSpec, ...] = (
    # Mode first: every other key is conditional on it.
    ParamSpec(
        "search.mode",
        "categorical",
        choices=("hybrid", "keyword", "vector"),
        why="on several sets one channel alone beats the default fusion (issue 11)",
    ),
    ParamSpec(
        "fusion.method",
        "categorical",
        choices=FUSIONS,
        when=(("search.mode", HYBRID),),
        why="score fusions beat RRF in Bruch et al. 2023",
    ),
    ParamSpec(
        "fusion.normalization",
        "categorical",
        choices=NORMALIZATIONS,
        when=(("search.mode", HYBRID), ("fusion.method", MethodsReading("normalization"))),
    ),
    ParamSpec(
        "fusion.k",
        "float",
        1.0,
        200.0,
        log=True,
        when=(("search.mode", HYBRID), ("fusion.method", MethodsReading("k"))),
        why="RRF's k: small lets each channel's top ranks dominate",
    ),
    # Only the ratio of the two weights matters (RRF scales, score fusions normalise them),
    # so one weight is searched, on a log scale around the vector weight.
    ParamSpec(
        "fusion.bm25_weight",
        "float",
        0.05,
        20.0,
        log=True,
        when=(("search.mode", HYBRID),),
    ),
    ParamSpec(
        "fusion.cross_lingual_bm25",
        "float",
        0.0,
        1.0,
        step=0.1,
        when=(("search.mode", HYBRID),),
        why="BM25 cannot match a question's words in chapters of another language",
    ),
    ParamSpec(
        "fusion.multiplier",
        "int",
        1,
        10,
        when=(("search.mode", HYBRID),),
        why="candidate pool per channel = top_k x multiplier",
    ),
    ParamSpec(
        "expansion.enabled",
        "categorical",
        choices=(True, False),
        when=(("search.mode", LEXICAL_MODES),),
        why="query expansion hurt BM25 on four sets (issue 11)",
    ),
    ParamSpec("lexical.k1", "float", 0.2, 3.0, step=0.1, when=(("search.mode", LEXICAL_MODES),)),
    ParamSpec("lexical.b", "float", 0.0, 1.0, step=0.05, when=(("search.mode", LEXICAL_MODES),)),
    ParamSpec(
        "lexical.title_weight",
        "float",
        0.0,
        5.0,
        step=0.25,
        when=(("search.mode", LEXICAL_MODES),),
        why="BM25F: the chapter's heading and breadcrumb as their own field",
    ),
    ParamSpec(
        "lexical.prf_docs",
        "categorical",
        choices=(0, 5, 10),
        when=(("search.mode", LEXICAL_MODES),),
        why="RM3 feedback from the top chapters (0 = off; it lowered keyword MRR on 5 sets)",
    ),
    ParamSpec(
        "lexical.prf_weight",
        "float",
        0.1,
        0.5,
        step=0.1,
        when=(("search.mode", LEXICAL_MODES), ("lexical.prf_docs", (5, 10))),
    ),
)


def available(space: Sequence[ParamSpec] = SEARCH_SPACE) -> tuple[ParamSpec, ...]:
    """The specs whose key this ``EngineConfig`` has, each checked against the config's range."""
    known = set(all_keys())
    out = []
    for spec in space:
        if spec.key not in known:
            continue
        _check_against_config(spec)
        out.append(spec)
    return tuple(out)


def suggest(trial: Any, space: Sequence[ParamSpec], base: EngineConfig) -> dict[str, Any]:
    """One trial's values: the active specs, in order (conditions see earlier choices)."""
    known = set(all_keys())
    values: dict[str, Any] = {}
    for spec in space:
        if spec.active(values, base, known):
            values[spec.key] = spec.suggest(trial)
    return values


def baseline_point(space: Sequence[ParamSpec], base: EngineConfig) -> dict[str, Any]:
    """The baseline as a trial (its active keys at their baseline values, where in range)."""
    known = set(all_keys())
    values: dict[str, Any] = {}
    for spec in space:
        if spec.active(values, base, known) and spec.contains(base.get(spec.key)):
            values[spec.key] = base.get(spec.key)
    return values


def _check_against_config(spec: ParamSpec) -> None:
    meta = field_spec(spec.key)
    choices = meta.get("choices")
    if spec.kind == "categorical" and choices and not set(spec.choices) <= set(choices):
        raise ValueError(f"{spec.key}: choices {spec.choices} are not all in {choices}")
    lo, hi = meta.get("range") or (None, None)
    if spec.kind != "categorical" and (
        (lo is not None and spec.low < lo) or (hi is not None and spec.high > hi)
    ):
        raise ValueError(f"{spec.key}: [{spec.low}, {spec.high}] leaves the config's [{lo}, {hi}]")
