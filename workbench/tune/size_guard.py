"""Whether a golden set is big enough for the search about to run on it, said before it runs.

Two signs that a search will fit noise rather than find a better config:

- too few queries per searched parameter: below ~10 tune queries a parameter, a search of
  dozens of trials finds a config that suits these queries (the bundled wiki: 64 tune
  queries, 9 parameters; `optimize` accepted a config whose tune MRR rose 0.614 -> 0.690
  while the holdout fell 0.779 -> 0.714);
- a minimum detectable effect above the effects the set's experiments have shown: the
  changes people try move MRR less than the set can see, so a "win" is mostly luck.

The optimizer refuses such a search unless told to go on (``--yes``), or narrows its
space to what the set can carry (``--narrow``); the Experiments page says the same.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.tree import parse_kb
from workbench.eval.golden import GoldenSet
from workbench.eval.health import GoldenHealth, golden_health
from workbench.eval.messages import Message, join
from workbench.eval.record_schema import RunRecordError
from workbench.eval.run_record import list_runs, load_run_record
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.search_space import ParamSpec
from workbench.workspace import Workspace

QUERIES_PER_PARAM = 10


class SearchTooLargeError(EngineError):
    """The golden set is too small for the search asked for."""


@dataclass(frozen=True)
class SizeGuard:
    queries: int  # tune queries the search would fit
    params: int  # parameters it would search
    mde: float | None  # of the primary measure at the tune split's size
    effects_seen: float | None  # median |delta| of the set's logged experiments

    @property
    def too_few_queries(self) -> bool:
        return self.queries < QUERIES_PER_PARAM * self.params

    @property
    def effects_too_small(self) -> bool:
        return (
            self.mde is not None and self.effects_seen is not None and self.mde > self.effects_seen
        )

    @property
    def ok(self) -> bool:
        return not (self.too_few_queries or self.effects_too_small)

    @property
    def carried_params(self) -> int:
        """How many parameters this many queries can carry (at least one)."""
        return max(1, self.queries // QUERIES_PER_PARAM)

    def note(self) -> Message | None:
        """One sentence per problem found, as a message the UI can translate (None: none)."""
        parts = []
        if self.too_few_queries:
            parts.append(
                Message(
                    "{queries} tune queries for {params} searched parameters (fewer than "
                    "{per} a parameter: the search would fit these queries; they carry about "
                    "{carried})",
                    {
                        "queries": self.queries,
                        "params": self.params,
                        "per": QUERIES_PER_PARAM,
                        "carried": self.carried_params,
                    },
                )
            )
        if self.effects_too_small:
            parts.append(
                Message(
                    "the set's minimum detectable MRR effect ({mde}) is above the typical "
                    "effect its experiments show ({seen})",
                    {"mde": f"{self.mde:.3f}", "seen": f"{self.effects_seen:.3f}"},
                )
            )
        if not parts:
            return None
        return Message(
            "golden set too small for this search: {problems}", {"problems": join(parts)}
        )

    def message(self) -> str:
        """The note's English ("" when none)."""
        note = self.note()
        return note.render() if note else ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            "params": self.params,
            "mde": self.mde,
            "effects_seen": self.effects_seen,
            "ok": self.ok,
            "message": self.message(),
        }


def size_guard(
    gs: GoldenSet, specs: Sequence[ParamSpec], experiments: Iterable[Mapping[str, Any]] = ()
) -> SizeGuard:
    """The guard for searching ``specs`` on ``gs``'s tune split, from its logged experiments."""
    health = golden_health(gs, experiments=experiments)
    return SizeGuard(
        len(gs.answerable("tune")), len(specs), health.mde["tune"], health.effects_seen
    )


def narrowed(specs: Sequence[ParamSpec], guard: SizeGuard) -> tuple[ParamSpec, ...]:
    """The first parameters of the space (its order puts the broadest first) the set carries."""
    return tuple(specs[: guard.carried_params])


def check(guard: SizeGuard, *, yes: bool) -> Message | None:
    """Raise when the search should not run; else the note to keep with it (None: fine)."""
    note = guard.note()
    if note is None:
        return None
    if yes:
        return join([note, Message("searching anyway (--yes)")])
    hint = "" if not guard.too_few_queries else f", --narrow to search {guard.carried_params}"
    raise SearchTooLargeError(
        f"{guard.message()}. Grow the set (see `wikirag golden health`), pass --yes to "
        f"search anyway{hint}, or --params KEY,... to search fewer"
    )


def select(specs: Sequence[ParamSpec], keys: Sequence[str]) -> tuple[ParamSpec, ...]:
    """The specs named by ``keys`` (``--params``); an unknown key is a one-line error."""
    known = {s.key for s in specs}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise EngineError(
            f"--params: {', '.join(unknown)} not in the search space; choose from "
            f"{', '.join(sorted(known))}"
        )
    return tuple(s for s in specs if s.key in keys)


def health_of(ws: Workspace, gs: GoldenSet) -> GoldenHealth:
    """The set's health from this KB's saved runs and experiment log (CLI and UI)."""

    runs = []
    for path in list_runs(ws.runs_dir):
        try:
            runs.append(load_run_record(path))
        except RunRecordError:
            continue  # a damaged record is `wikirag eval`'s to report, not the health's
    records = ExperimentStore(ws.experiments).load_records()

    kb = parse_kb(ws.kb) if Path(ws.kb).is_dir() else None
    return golden_health(
        gs, experiments=records, runs=runs, baseline_hash=ws.load_config().hash, kb=kb
    )
