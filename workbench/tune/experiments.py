"""Accept/rollback experiments, the optimization log, baselines, auto-optimize and the CI gate.

One experiment = the current baseline config + one change, both evaluated on the tune
split (the holdout is evaluated too; the rule only checks it is not significantly worse).
The change is accepted only if every criterion of the acceptance rule holds
(workbench/tune/rule.py: rule.yaml or a preset; workbench/tune/acceptance.py: ``decide``).

Concurrency: every writer (``run_experiment``, ``restore``, the optimize loop, the UI
buttons) holds one lock per KB (``flock`` on ``experiments/<kb>/.experiment.lock``) from
reading the baseline to writing it, so two experiments never decide against the same
baseline; a second writer is refused at once with who holds the lock since when.

Crash safety: nothing is written until both evaluations finished. Then (1) the JSONL
record (naming the baseline version it will create) and (2) the Markdown log entry are
appended atomically, and (3) for an accepted change ``baselines/vN.yaml`` and
``baseline.yaml`` are written. ``recover`` finishes (2) and (3) after a crash, writing
exactly the version the record names, so it is idempotent; whoever takes the lock next
runs it and says so (stderr in the CLI, a warning in the UI).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.atomic import atomic_append_text, atomic_write_text
from engine.config import EngineConfig
from engine.errors import EngineError
from workbench.eval import golden
from workbench.eval.evaluate import EvalRun, Evaluator
from workbench.tune import rule as rules
from workbench.tune.acceptance import Criterion as Criterion
from workbench.tune.acceptance import Decision, decide
from workbench.tune.catalog import TIER_NAMES, needs_reindex, strategies
from workbench.tune.rule import STATISTICAL as STATISTICAL
from workbench.tune.rule import STRICT as STRICT
from workbench.tune.rule import AcceptanceRule
from workbench.workspace import Workspace

RULE = STATISTICAL  # the default when experiments/<kb>/rule.yaml is absent


@dataclass
class ExperimentResult:
    number: int
    title: str
    tier: str
    changes: dict[str, tuple[Any, Any]]
    decision: Decision
    base_tune: dict[str, float]
    cand_tune: dict[str, float]
    base_holdout: dict[str, float]
    cand_holdout: dict[str, float]
    base_hash: str
    cand_hash: str
    cand_yaml: str
    mode: str
    notes: str = ""
    date: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def no_effect(self) -> bool:
        """True when the change left every ranking identical: reported, never logged."""
        return bool(self.extra.get("no_effect"))

    @property
    def verdict(self) -> str:
        if self.no_effect:
            return "no effect"
        return "accepted" if self.decision.accepted else "rolled back"

    def to_record(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "title": self.title,
            "date": self.date,
            "tier": self.tier,
            "changes": {k: list(v) for k, v in self.changes.items()},
            "decision": self.verdict,
            "details": self.decision.to_dict(),
            "mode": self.mode,
            "baseline": {
                "hash": self.base_hash,
                "tune": self.base_tune,
                "holdout": self.base_holdout,
            },
            "result": {
                "hash": self.cand_hash,
                "tune": self.cand_tune,
                "holdout": self.cand_holdout,
            },
            "config_yaml": self.cand_yaml,
            "notes": self.notes,
            **self.extra,
        }


class ExperimentStore:
    """The files of one KB's experiments folder."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)

    @property
    def log_md(self) -> Path:
        return self.folder / "optimization_log.md"

    @property
    def records(self) -> Path:
        return self.folder / "experiments.jsonl"

    @property
    def baseline(self) -> Path:
        return self.folder / "baseline.yaml"

    @property
    def versions(self) -> Path:
        return self.folder / "baselines"

    @property
    def lock_file(self) -> Path:
        return self.folder / ".experiment.lock"

    @contextlib.contextmanager
    def lock(self, what: str = "experiment") -> Iterator[None]:
        """Hold this KB's experiment lock; refuse at once if another writer holds it.

        Re-entrant within a thread (``optimize`` holds it around many ``run_experiment``
        calls). Two threads of one process (two UI sessions) open the file separately, and
        flock locks belong to the open file, so they exclude each other like processes do.
        """
        key = str(self.folder.resolve())
        held: dict[str, int] = _HELD.__dict__.setdefault("depth", {})
        if held.get(key):
            held[key] += 1
            try:
                yield
            finally:
                held[key] -= 1
            return
        try:
            import fcntl
        except ImportError:  # Windows: no advisory locks; experiments run one at a time there
            yield
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ExperimentBusyError(self._busy_message(fd)) from None
            holder = json.dumps({"pid": os.getpid(), "since": _now(), "what": what})
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder.encode("utf-8"), 0)
            held[key] = 1
            try:
                yield
            finally:
                held[key] = 0
                os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # releases the flock

    def _busy_message(self, fd: int) -> str:
        try:
            info = json.loads(os.pread(fd, 4096, 0).decode("utf-8") or "{}")
        except ValueError:
            info = {}
        since = info.get("since", "an unknown time")
        what = f" ({info['what']}, pid {info.get('pid', '?')})" if info.get("what") else ""
        return (
            f"another experiment is running on {self.folder.name} since {since}{what}; "
            "wait for it to finish, then try again"
        )

    @contextlib.contextmanager
    def writing(self, what: str, notify: Callable[[str], None] | None = None) -> Iterator[None]:
        """The lock, plus recovery of an interrupted accept, reported through ``notify``."""
        with self.lock(what):
            msg = self.recover()
            if msg and notify is not None:
                notify(msg)
            yield

    def load_records(self) -> list[dict[str, Any]]:
        if not self.records.is_file():
            return []
        out = []
        for n, line in enumerate(self.records.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip():
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise EngineError(
                    f"{self.records}:{n} is not valid JSON ({exc}); fix or remove that line"
                ) from exc
        return out

    def baseline_config(self) -> EngineConfig:
        return EngineConfig.load(self.baseline) if self.baseline.is_file() else EngineConfig()

    def next_number(self) -> int:
        return max((r.get("number", 0) for r in self.load_records()), default=0) + 1

    def accepted_versions(self) -> list[dict[str, Any]]:
        """Version 0 is the first baseline; each accepted experiment adds one."""
        out = []
        for path in self.versions.glob("v*.yaml"):
            if path.stem[1:].isdigit():  # a user's "v2-old.yaml" copy is not a version
                out.append({"version": int(path.stem[1:]), "path": str(path)})
        return sorted(out, key=lambda v: v["version"])

    def ensure_initial_version(self) -> None:
        if not (self.versions / "v0.yaml").is_file():
            atomic_write_text(self.versions / "v0.yaml", self.baseline_config().to_yaml())
            if not self.baseline.is_file():
                atomic_write_text(self.baseline, EngineConfig().to_yaml())

    def next_version(self) -> int:
        return max((v["version"] for v in self.accepted_versions()), default=0) + 1

    def write_baseline(self, cfg: EngineConfig, version: int | None = None) -> int:
        """Write ``baselines/v<version>.yaml`` (default: the next number) and ``baseline.yaml``."""
        with self.lock("write baseline"):
            n = self.next_version() if version is None else version
            atomic_write_text(self.versions / f"v{n}.yaml", cfg.to_yaml())
            atomic_write_text(self.baseline, cfg.to_yaml())
            return n

    def append(self, result: ExperimentResult) -> None:
        # Under the lock so two first experiments cannot both write the header (and the
        # second header replace the first entry).
        with self.lock("append"):
            line = json.dumps(result.to_record(), ensure_ascii=False) + "\n"
            atomic_append_text(self.records, line)
            self._append_log(format_log_entry(result))

    def _append_log(self, entry: str) -> None:
        if not self.log_md.is_file():
            atomic_write_text(self.log_md, LOG_HEADER)
        atomic_append_text(self.log_md, entry)

    def recover(self) -> str | None:
        """Finish an accept a crash interrupted: its log entry, its version file, the baseline.

        Idempotent: the version file is the one the record names, so running it twice (or
        after a crash between the version file and ``baseline.yaml``) adds no ``vN.yaml``.
        Returns what was done, or None when nothing was needed.
        """
        with self.lock("recover"):
            records = self.load_records()
            recs = [r for r in records if r.get("decision") == "accepted"]
            if not recs:
                return None
            last = recs[-1]
            done = []
            log = self.log_md.read_text(encoding="utf-8") if self.log_md.is_file() else ""
            if f"### Experiment {last['number']}:" not in log:
                self._append_log(_recovered_log_entry(last))
                done.append("wrote its missing log entry")
            cfg = EngineConfig.from_yaml(last["config_yaml"])
            current = self.baseline_config().hash
            # The crash signature is a baseline still at the config the experiment started
            # from; any other baseline was edited by hand after the accept and is kept.
            started_from = (last.get("baseline") or {}).get("hash", current)
            if (
                current != cfg.hash
                and current == started_from
                and not _restored_after(records, last)
            ):
                n = self.write_baseline(cfg, self._version_of(last, cfg))
                done.append(f"re-applied baseline v{n}")
            if not done:
                return None
            return (
                f"recovered experiment {last['number']} after an interrupted write: "
                f"{' and '.join(done)}"
            )

    def _version_of(self, record: Mapping[str, Any], cfg: EngineConfig) -> int:
        if isinstance(record.get("baseline_version"), int):
            return int(record["baseline_version"])
        # Records written before versions were named: reuse a version file that already
        # holds this config (crash after writing it) rather than adding a duplicate.
        for v in reversed(self.accepted_versions()):
            if EngineConfig.load(v["path"]).hash == cfg.hash:
                return int(v["version"])
        return self.next_version()

    def restore(self, version: int, notify: Callable[[str], None] | None = None) -> EngineConfig:
        with self.writing("restore", notify):
            return self._restore(version)

    def _restore(self, version: int) -> EngineConfig:
        path = self.versions / f"v{version}.yaml"
        if not path.is_file():
            known = ", ".join(str(v["version"]) for v in self.accepted_versions()) or "none"
            raise EngineError(f"no baseline version {version}; known versions: {known}")
        cfg = EngineConfig.load(path)
        atomic_write_text(self.baseline, cfg.to_yaml())
        rec = {
            "number": self.next_number(),
            "title": f"Restore baseline v{version}",
            "date": _now(),
            "tier": "restore",
            "decision": "restored",
            "restored_version": version,
            "config_yaml": cfg.to_yaml(),
            "result": {"hash": cfg.hash},
        }
        atomic_append_text(self.records, json.dumps(rec, ensure_ascii=False) + "\n")
        self._append_log(
            f"\n### Experiment {rec['number']}: Restore baseline v{version}\n\n"
            f"- **Date**: {rec['date']}\n- **Decision**: ↩️ Restored version {version} "
            f"(config {cfg.hash})\n",
        )
        return cfg


class ExperimentBusyError(EngineError):
    """Another process or UI session holds this KB's experiment lock."""


_HELD = threading.local()  # per thread: lock depth by experiments folder (re-entrancy)


def one_line(text: str) -> str:
    """Titles and notes are one line in the log: a newline in them could forge an entry."""
    return re.sub(r"[\s\x00-\x1f\x7f\x85\u2028\u2029]+", " ", text).strip()


def _recovered_log_entry(rec: Mapping[str, Any]) -> str:
    return (
        f"\n### Experiment {rec['number']}: {one_line(str(rec.get('title', '')))}\n\n"
        f"- **Date**: {rec.get('date', '')}\n"
        f"- **Decision**: ✅ Accepted — new baseline (config {rec.get('result', {}).get('hash')}); "
        "this entry was completed after an interrupted write, details in experiments.jsonl\n"
    )


def _restored_after(records: list[dict[str, Any]], accepted: dict[str, Any]) -> bool:
    return any(
        r.get("decision") == "restored" and r["number"] > accepted["number"] for r in records
    )


LOG_HEADER = """# Optimization log

Every experiment the workbench ran on this knowledge base, accepted or not, newest last.
Decisions are taken on the tune split; holdout numbers are reported beside them so
overfitting shows. Written by `wikirag experiment try` / `wikirag optimize` and the
Experiments page; machine-readable twin: `experiments.jsonl`.
"""


def _fmt_metrics(m: Mapping[str, float]) -> str:
    return (
        f"Recall@5 {m.get('recall@5', 0):.3f}, MRR {m.get('mrr', 0):.3f}, "
        f"Hit@5 {m.get('hit@5', 0):.3f}, NDCG@10 {m.get('ndcg@10', 0):.3f}, "
        f"p50 {m.get('latency_p50', 0):.0f} ms"
    )


def format_log_entry(r: ExperimentResult) -> str:
    d = r.decision
    change = "; ".join(f"`{k}`: {a!r} → {b!r}" for k, (a, b) in r.changes.items()) or "(none)"
    c5, cm = d.comparisons["recall@5"], d.comparisons["mrr"]
    cp = d.comparisons.get(d.rule.primary, cm)
    verdict = "✅ Accepted — new baseline" if d.accepted else "❌ Rolled back"
    why = "all criteria hold" if d.accepted else "; ".join(d.reasons)
    criteria = "".join(
        f"  - {'✅' if c.passed else '❌'} {c.name}: {c.shown} (needs {c.threshold})"
        + (f" — {c.detail}" if c.detail else "")
        + "\n"
        for c in d.criteria
    )
    return (
        f"\n### Experiment {r.number}: {one_line(r.title)}\n\n"
        f"- **Date**: {r.date}\n"
        f"- **Strategy tier**: {one_line(r.tier)}\n"
        f"- **Change**: {change}\n"
        f"- **Baseline** (`{r.base_hash}`, tune): {_fmt_metrics(r.base_tune)}\n"
        f"- **Result** (`{r.cand_hash}`, tune): {_fmt_metrics(r.cand_tune)}\n"
        f"- **Statistics**: ΔRecall@5 {c5.delta:+.3f} (95% CI [{c5.ci_low:+.3f}, {c5.ci_high:+.3f}], "
        f"p={c5.p_value:.3f}); ΔMRR {cm.delta:+.3f} (95% CI [{cm.ci_low:+.3f}, {cm.ci_high:+.3f}], "
        f"p={cm.p_value:.3f}); wins/losses/ties on {cp.measure} {cp.wins}/{cp.losses}/{cp.ties}\n"
        f"- **Holdout**: Recall@5 {r.base_holdout.get('recall@5', 0):.3f} → "
        f"{r.cand_holdout.get('recall@5', 0):.3f}, MRR {r.base_holdout.get('mrr', 0):.3f} → "
        f"{r.cand_holdout.get('mrr', 0):.3f}\n"
        f"- **Rule**: {d.rule.name} (primary {d.rule.primary}, α = {d.rule.alpha:g})\n"
        f"{criteria}"
        f"- **Decision**: {verdict} ({why})\n"
        f"- **Notes**: {one_line(r.notes) or '-'}\n"
    )


def _now() -> str:
    return dt.datetime.now().strftime("%Y-%m-%d %H:%M")


def _with_latency(run: EvalRun, mode: str) -> dict[str, float]:
    m = dict(run.means(mode))
    lat = run.latency(mode)
    m["latency_p50"], m["latency_p95"] = lat["p50"], lat["p95"]
    m["queries"] = float(len(run.for_mode(mode)))
    return m


@dataclass
class Scored:
    """A candidate config evaluated beside the baseline and decided; nothing written yet."""

    base_cfg: EngineConfig
    cand_cfg: EngineConfig
    mode: str
    runs: dict[tuple[str, str], EvalRun]  # ("b" | "c", "tune" | "holdout") -> run
    decision: Decision


def score_candidate(
    gs: golden.GoldenSet,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    base_cfg: EngineConfig,
    cand_cfg: EngineConfig,
    rule: AcceptanceRule = RULE,
    *,
    evaluators: tuple[Evaluator, Evaluator] | None = None,
) -> Scored:
    """Evaluate baseline and candidate on tune and holdout and apply ``rule``; no writes.

    The optimizer's entry point for "would the rule accept this config?". Locking,
    golden-set checks and logging belong to ``run_experiment``, which calls this.
    """
    mode_b, mode_c = base_cfg.search.mode, cand_cfg.search.mode
    ev_b, ev_c = evaluators or (evaluator_for(base_cfg), evaluator_for(cand_cfg))
    runs = {}
    for split in ("tune", "holdout"):
        runs[("b", split)] = ev_b.run(gs, base_cfg, modes=[mode_b], split=split)
        runs[("c", split)] = ev_c.run(gs, cand_cfg, modes=[mode_c], split=split)
    if mode_b != mode_c:  # compare under the name each run used
        for split in ("tune", "holdout"):
            runs[("c", split)] = _rename_mode(runs[("c", split)], mode_c, mode_b)
    holdout = (runs[("b", "holdout")], runs[("c", "holdout")])
    decision = decide(runs[("b", "tune")], runs[("c", "tune")], mode_b, rule, holdout=holdout)
    return Scored(base_cfg, cand_cfg, mode_b, runs, decision)


def same_rankings(runs: Mapping[tuple[str, str], EvalRun], mode: str) -> bool:
    """Whether baseline and candidate ranked every query identically on tune and holdout."""
    for split in ("tune", "holdout"):
        b, c = runs.get(("b", split)), runs.get(("c", split))
        if b is None or c is None:
            continue
        cand = {r.item.id: r for r in c.for_mode(mode)}
        for r in b.for_mode(mode):
            other = cand.get(r.item.id)
            if (
                other is None
                or [x.node_id for x in other.ranked] != [x.node_id for x in r.ranked]
                or other.metrics != r.metrics
            ):
                return False
    return True


def query_moves(
    base: EvalRun, cand: EvalRun, mode: str, measure: str, n: int = 10
) -> dict[str, list[dict[str, Any]]]:
    """The queries the change improved and regressed most on ``measure`` (tune split)."""
    b, c = base.per_query(mode), cand.per_query(mode)
    text = {r.item.id: r.item.query for r in base.for_mode(mode)}
    deltas = [(qid, c[qid].get(measure, 0.0) - b[qid].get(measure, 0.0)) for qid in b if qid in c]
    up = sorted((d for d in deltas if d[1] > 1e-9), key=lambda d: (-d[1], d[0]))[:n]
    down = sorted((d for d in deltas if d[1] < -1e-9), key=lambda d: (d[1], d[0]))[:n]
    return {
        kind: [{"id": q, "query": text.get(q, ""), "delta": round(d, 4)} for q, d in rows]
        for kind, rows in (("improved", up), ("regressed", down))
    }


def run_experiment(
    ws: Workspace,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    overrides: Mapping[str, Any],
    *,
    title: str | None = None,
    tier: str = "manual",
    notes: str = "",
    dry_run: bool = False,
    notify: Callable[[str], None] | None = None,
    allow_invalid: bool = False,
    rule: AcceptanceRule | None = None,
    extra: Mapping[str, Any] | None = None,
) -> ExperimentResult:
    """Evaluate baseline vs baseline+change on tune (and holdout), decide, log, maybe accept.

    ``rule``: default experiments/<kb>/rule.yaml if present, else the statistical preset.

    Holds the KB's experiment lock from reading the baseline to writing it (module doc);
    ``notify`` hears about a recovered interrupted accept and, with ``allow_invalid``,
    which invalid golden items were skipped (an invalid golden set is refused otherwise).
    ``extra`` is stored in the experiment record as it is (e.g. the optimizer's study).
    """
    store = ExperimentStore(ws.experiments)
    with store.writing("experiment try", notify):
        return _run_locked(
            ws,
            store,
            evaluator_for,
            overrides,
            title,
            tier,
            notes,
            dry_run=dry_run,
            allow_invalid=allow_invalid,
            notify=notify,
            rule=rule or rules.resolve(ws.experiments),
            extra=extra,
        )


def _run_locked(
    ws: Workspace,
    store: ExperimentStore,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    overrides: Mapping[str, Any],
    title: str | None,
    tier: str,
    notes: str,
    *,
    dry_run: bool,
    allow_invalid: bool,
    notify: Callable[[str], None] | None,
    rule: AcceptanceRule,
    extra: Mapping[str, Any] | None = None,
) -> ExperimentResult:
    gs = golden.load(ws.dataset)
    base_cfg = store.baseline_config()
    cand_cfg = base_cfg.with_overrides(dict(overrides))
    changes = base_cfg.diff(cand_cfg)
    if not changes:
        raise EngineError("the change leaves the config as it is; pick a different value")
    mode_b = base_cfg.search.mode
    ev_b, ev_c = evaluator_for(base_cfg), evaluator_for(cand_cfg)
    kb = getattr(getattr(ev_b, "engine", None), "kb", None)  # node ids checked when known
    gs = golden.checked(gs, kb, allow_invalid=allow_invalid, notify=notify)
    sc = score_candidate(gs, evaluator_for, base_cfg, cand_cfg, rule, evaluators=(ev_b, ev_c))
    runs, decision = sc.runs, sc.decision
    base_t, cand_t = runs[("b", "tune")], runs[("c", "tune")]
    no_effect = same_rankings(runs, mode_b)
    number = 0 if no_effect else store.next_number()
    result = ExperimentResult(
        number=number,
        title=one_line(title or "") or ", ".join(f"{k}={b}" for k, (_, b) in changes.items()),
        tier=one_line(tier),
        changes=changes,
        decision=decision,
        base_tune=_with_latency(base_t, mode_b),
        cand_tune=_with_latency(cand_t, mode_b),
        base_holdout=_with_latency(runs[("b", "holdout")], mode_b),
        cand_holdout=_with_latency(runs[("c", "holdout")], mode_b),
        base_hash=base_cfg.hash,
        cand_hash=cand_cfg.hash,
        cand_yaml=cand_cfg.to_yaml(),
        mode=mode_b,
        notes=one_line(notes),
        date=_now(),
        extra=dict(extra or {}),
    )
    result.extra["queries"] = query_moves(base_t, cand_t, mode_b, rule.primary)
    # which golden set decided it: the trajectory marks where the set changed
    result.extra["dataset_hash"] = gs.content_hash
    if no_effect:
        # An identical ranking for every query is not an experiment: nothing to decide, and
        # the log stays a record of changes that did something (the scorecard once logged
        # index.use_summaries=True without an LLM as an experiment with identical metrics).
        result.extra["no_effect"] = True
        return result
    if dry_run:
        return result
    store.ensure_initial_version()
    if decision.accepted:
        # Named in the record before any file is written, so recovery after a crash
        # rewrites this exact version instead of adding another.
        result.extra["baseline_version"] = store.next_version()
    store.append(result)
    if decision.accepted:
        store.write_baseline(cand_cfg, result.extra["baseline_version"])
    return result


def _rename_mode(run: EvalRun, old: str, new: str) -> EvalRun:
    from dataclasses import replace

    results = [replace(r, mode=new) if r.mode == old else r for r in run.results]
    return replace(run, results=results, modes=tuple(new if m == old else m for m in run.modes))


def trajectory(store: ExperimentStore) -> list[dict[str, Any]]:
    """Score after each experiment: the baseline's tune metrics as accepted changes land."""
    points = []
    for r in store.load_records():
        if r.get("decision") not in ("accepted", "rolled back"):
            continue
        if not points:
            points.append({"experiment": 0, "decision": "baseline", **r["baseline"]["tune"]})
        cur = r["result"]["tune"] if r["decision"] == "accepted" else points[-1]
        row = {k: v for k, v in cur.items() if k not in ("experiment", "decision", "title")}
        points.append(
            {
                "experiment": r["number"],
                "decision": r["decision"],
                "title": r.get("title", ""),
                "dataset_hash": r.get("dataset_hash", ""),
                **row,
            }
        )
    return points


def log_rows(store: ExperimentStore) -> list[dict[str, Any]]:
    """The log as table rows, newest first: what changed, the decision, tune/holdout deltas."""
    rows = []
    for r in reversed(store.load_records()):
        base, res = r.get("baseline") or {}, r.get("result") or {}
        primary = ((r.get("details") or {}).get("rule") or {}).get("primary", "mrr")

        def delta(split: str, m: str, base: dict = base, res: dict = res) -> float | None:
            a, b = (base.get(split) or {}).get(m), (res.get(split) or {}).get(m)
            return None if a is None or b is None else round(float(b) - float(a), 4)

        rows.append(
            {
                "number": int(r.get("number", 0)),
                "date": str(r.get("date", "")),
                "title": str(r.get("title", "")),
                "decision": str(r.get("decision", "")),
                "measure": primary,
                "tune Δ": delta("tune", primary),
                "holdout Δ": delta("holdout", primary),
                "tier": str(r.get("tier", "")),
            }
        )
    return rows


def optimize(
    ws: Workspace,
    evaluator_for: Callable[[EngineConfig], Evaluator],
    *,
    budget: int = 10,
    tiers: set[int] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[ExperimentResult]:
    """Walk the catalog one change at a time from the lowest tier; stop at the budget."""
    results: list[ExperimentResult] = []
    tried: set[str] = set()
    todo = [(s, c) for s in strategies(tiers) for c in s.candidates if not needs_reindex(c)]
    todo.sort(key=lambda t: t[0].tier)
    for strat, change in todo:
        if len(results) >= budget:
            break
        base = ExperimentStore(ws.experiments).baseline_config()
        try:
            cand = base.with_overrides(change)
        except EngineError:
            continue
        key = _ranking_key(cand)
        if not base.diff(cand) or key in tried or key == _ranking_key(base):
            continue
        tried.add(key)
        if progress:
            progress(len(results), budget, strat.name)
        res = run_experiment(
            ws,
            evaluator_for,
            change,
            title=f"{strat.name}: " + ", ".join(f"{k}={v}" for k, v in change.items()),
            tier=TIER_NAMES[strat.tier],
            notes=f"auto-optimize; risk {strat.risk}. {strat.why}",
        )
        results.append(res)
    if progress:
        progress(len(results), budget, "done")
    return results


def _ranking_key(cfg: EngineConfig) -> str:
    """Configs that rank identically share a key: RRF is invariant to scaling both weights."""
    v, b = cfg.fusion.vector_weight, cfg.fusion.bm25_weight
    top = max(v, b)
    if top > 0:
        cfg = cfg.with_overrides({"fusion.vector_weight": v / top, "fusion.bm25_weight": b / top})
    return cfg.hash


def gate(ws: Workspace, current: EvalRun, rule: AcceptanceRule | None = None) -> tuple[bool, str]:
    """CI gate: does ``current`` regress against the accepted baseline?

    The same rule as experiments (rule.yaml, else the statistical preset), asked the
    non-inferiority question: the primary measure must not be significantly worse
    (statistical) or not drop by more than the improvement threshold (strict); the other
    criteria are unchanged. No holdout check: the gate scores the split it was given.
    """
    from workbench.eval.engines import evaluator

    store = ExperimentStore(ws.experiments)
    rule = rule or rules.resolve(ws.experiments)
    base_cfg = store.baseline_config()
    if base_cfg.hash == current.config.hash:
        return True, f"config is the baseline ({base_cfg.hash}); nothing to compare"
    gs = golden.load(ws.dataset)
    mode = current.modes[0]
    base_run = evaluator(ws, base_cfg).run(gs, base_cfg, modes=[mode], split=current.split)
    d = decide(base_run, current, mode, rule, require_improvement=False)
    c = d.comparisons
    deltas = (
        f"ΔRecall@5 {c['recall@5'].delta:+.3f}, ΔMRR {c['mrr'].delta:+.3f}, "
        f"ΔHit@5 {c['hit@5'].delta:+.3f}; rule {rule.name}"
    )
    if d.accepted:
        return True, f"no regression vs baseline {base_cfg.hash}: {deltas}"
    return False, f"regression vs baseline {base_cfg.hash}: " + "; ".join(
        d.reasons
    ) + f" ({deltas})"
