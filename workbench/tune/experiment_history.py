"""The experiment log read back: the score trajectory and the table of decisions."""

from __future__ import annotations

from typing import Any

from workbench.eval.messages import Translate
from workbench.tune.catalog import tier_message, title_message
from workbench.tune.experiment_entry import entry_text
from workbench.tune.experiment_store import ExperimentStore
from workbench.tune.verdict import from_record

DECISIONS = ("accepted", "rolled back", "restored")  # what a record decided, as logged


def trajectory(store: ExperimentStore) -> list[dict[str, Any]]:
    """Score after each experiment: the baseline's tune metrics as accepted changes land."""
    points: list[dict[str, Any]] = []
    for r in store.load_records():
        if r.get("decision") not in ("accepted", "rolled back"):
            continue
        if not points:
            points.append({"experiment": 0, "decision": "baseline", **r["baseline"]["tune"]})
        cur = r["result"]["tune"] if r["decision"] == "accepted" else points[-1]
        row = {
            k: v
            for k, v in cur.items()
            if k not in ("experiment", "decision", "title", "dataset_hash", "candidate")
        }
        points.append(
            {
                "experiment": r["number"],
                "decision": r["decision"],
                "title": r.get("title", ""),
                "dataset_hash": r.get("dataset_hash", ""),
                # what the candidate scored, accepted or not: a rolled-back experiment is a
                # point off the baseline's line, not a repeat of it
                "candidate": dict(r["result"]["tune"]),
                **row,
            }
        )
    return points


def log_rows(store: ExperimentStore, translate: Translate | None = None) -> list[dict[str, Any]]:
    """The log as table rows, newest first: what changed, the decision, tune/holdout deltas;
    titles, tiers, decisions and verdicts in the words ``translate`` gives."""
    tr = translate or _same
    rows = []
    for r in reversed(store.load_records()):
        base, res = r.get("baseline") or {}, r.get("result") or {}
        primary = ((r.get("details") or {}).get("rule") or {}).get("primary", "mrr")

        def delta(split: str, m: str, base: dict = base, res: dict = res) -> float | None:
            a, b = (base.get(split) or {}).get(m), (res.get(split) or {}).get(m)
            return None if a is None or b is None else round(float(b) - float(a), 4)

        decision = str(r.get("decision", ""))
        rows.append(
            {
                "number": int(r.get("number", 0)),
                "date": str(r.get("date", "")),
                "title": title_message(str(r.get("title", ""))).render(translate),
                "decision": tr(decision) if decision in DECISIONS else decision,
                "measure": primary,
                "tune Δ": delta("tune", primary),
                "holdout Δ": delta("holdout", primary),
                "tier": tier_message(str(r.get("tier", ""))).render(translate),
                "verdict": v.text(translate) if (v := from_record(r)) else "",
            }
        )
    return rows


def _same(text: str) -> str:
    return text


def log_entry(
    store: ExperimentStore, number: int, translate: Translate | None = None
) -> str | None:
    """Experiment ``number``'s entry in the log (what a deep link opens), made from its
    record in the words ``translate`` gives; None when the log has no such experiment."""
    for r in store.load_records():
        if r.get("number") == number and r.get("decision") in DECISIONS:
            return entry_text(r, translate).strip()
    return None
