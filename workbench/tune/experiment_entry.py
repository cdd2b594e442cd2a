"""An experiment's entry in the Markdown log, made from its record, in the reader's language.

``experiments.md`` is written in English as each experiment is logged (no translator);
the Experiments page renders the same entries from ``experiments.jsonl`` through its
translator, so the Chinese UI reads the log in Chinese while the file stays English.
Every line is a :class:`~workbench.eval.messages.Message`; ids, config keys, hashes and
metric names stay as they are.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from workbench.eval.messages import Message, Translate
from workbench.tune.catalog import notes_message, tier_message, title_message
from workbench.tune.criterion_words import detail_message, name_message, threshold_message
from workbench.tune.verdict import from_record

LOG_TITLE = "# Optimization log\n\n"
LOG_INTRO = Message(
    "Every experiment the workbench ran on this knowledge base, accepted or not, newest last.\n"
    "Decisions are taken on the tune split; holdout numbers are reported beside them so\n"
    "overfitting shows. Written by `wikirag experiment try` / `wikirag optimize` and the\n"
    "Experiments page; machine-readable twin: `experiments.jsonl`.\n"
)
LOG_HEADER = LOG_TITLE + LOG_INTRO.key
RESTORE_TITLE = Message("Restore baseline v{v}")  # a restore's title in the log
ACCEPTED = Message("✅ Accepted — new baseline")
ROLLED_BACK = Message("❌ Rolled back")


def one_line(text: str) -> str:
    """Titles and notes are one line in the log: a newline in them could forge an entry."""
    return re.sub(r"[\s\x00-\x1f\x7f\x85\u2028\u2029]+", " ", text).strip()


def _metrics(m: Mapping[str, float]) -> str:
    return (
        f"Recall@5 {m.get('recall@5', 0):.3f}, MRR {m.get('mrr', 0):.3f}, "
        f"Hit@5 {m.get('hit@5', 0):.3f}, NDCG@10 {m.get('ndcg@10', 0):.3f}, "
        f"p50 {m.get('latency_p50', 0):.0f} ms"
    )


def _shown(value: Any) -> str:
    """A criterion's measured value as ``Criterion.shown`` prints it."""
    return "n/a" if value is None or math.isnan(float(value)) else f"{float(value):+.4f}"


def _criterion(c: Mapping[str, Any]) -> Message:
    return Message(
        "{name}: {value} (needs {threshold})",
        {
            "name": name_message(str(c.get("name", ""))),
            "value": _shown(c.get("value")),
            "threshold": threshold_message(str(c.get("threshold", ""))),
        },
    )


def _line(msg: Message, tr: Translate | None) -> str:
    return f"- {msg.render(tr)}\n"


def entry_text(
    rec: Mapping[str, Any], translate: Translate | None = None, rule_name: str | None = None
) -> str:
    """The log entry of one record (an experiment or a restore). ``rule_name`` names the
    rule as the log file does (the record keeps only its preset)."""
    tr = translate
    title: Message = title_message(one_line(str(rec.get("title", ""))))
    if rec.get("decision") == "restored":
        restore = Message(RESTORE_TITLE.key, {"v": rec.get("restored_version")})
        title = restore if restore.render() == str(rec.get("title")) else title
    head = Message("Experiment {n}: {title}", {"n": rec.get("number"), "title": title})
    out = f"\n### {head.render(tr)}\n\n" + _line(
        Message("**Date**: {date}", {"date": rec.get("date", "")}), tr
    )
    if rec.get("decision") == "restored":
        restored = Message(
            "**Decision**: ↩️ Restored version {v} (config {hash})",
            {"v": rec.get("restored_version"), "hash": (rec.get("result") or {}).get("hash")},
        )
        return out + _line(restored, tr)
    details = rec.get("details") or {}
    comps, rule = details.get("comparisons") or {}, details.get("rule") or {}
    base, res = rec.get("baseline") or {}, rec.get("result") or {}
    changes = "; ".join(
        f"`{k}`: {pair[0]!r} → {pair[1]!r}" for k, pair in (rec.get("changes") or {}).items()
    )
    lines = [
        Message("**Strategy tier**: {tier}", {"tier": tier_message(one_line(rec.get("tier", "")))}),
        Message("**Change**: {change}", {"change": changes or Message("(none)")}),
        Message(
            "**Baseline** (`{hash}`, tune): {metrics}",
            {"hash": base.get("hash"), "metrics": _metrics(base.get("tune") or {})},
        ),
        Message(
            "**Result** (`{hash}`, tune): {metrics}",
            {"hash": res.get("hash"), "metrics": _metrics(res.get("tune") or {})},
        ),
    ]
    lines += _statistics_lines(comps, rule, base, res)
    out += "".join(_line(m, tr) for m in lines)
    if rule:
        rule_line = Message(
            "**Rule**: {name} (primary {primary}, α = {alpha})",
            {
                "name": rule_name or Message(str(rule.get("preset", ""))),
                "primary": rule.get("primary", ""),
                "alpha": f"{float(rule.get('alpha', 0.05)):g}",
            },
        )
        out += _line(rule_line, tr)
    criteria = list(details.get("criteria") or [])
    for c in criteria:
        detail = f" — {detail_message(c['detail']).render(tr)}" if c.get("detail") else ""
        mark = "✅" if c.get("passed") else "❌"
        out += f"  - {mark} {_criterion(c).render(tr)}{detail}\n"
    accepted = rec.get("decision") == "accepted"
    out += _line(
        Message(
            "**Decision**: {verdict} ({why})",
            {
                "verdict": ACCEPTED if accepted else ROLLED_BACK,
                "why": Message("all criteria hold") if accepted else _reasons(criteria, tr),
            },
        ),
        tr,
    )
    if (v := from_record(rec)) is not None:
        out += _line(Message("**Verdict**: {verdict}", {"verdict": v.text(tr)}), tr)
    notes = one_line(str(rec.get("notes", "")))
    return out + _line(
        Message("**Notes**: {notes}", {"notes": notes_message(notes) if notes else "-"}), tr
    )


def _statistics_lines(
    comps: Mapping[str, Any],
    rule: Mapping[str, Any],
    base: Mapping[str, Any],
    res: Mapping[str, Any],
) -> list[Message]:
    """The entry's statistics (deltas with CIs and p-values) and holdout lines."""
    out: list[Message] = []
    if "recall@5" in comps and "mrr" in comps:
        c5, cm = comps["recall@5"], comps["mrr"]
        cp = comps.get(str(rule.get("primary")), cm)
        out.append(
            Message(
                "**Statistics**: ΔRecall@5 {r_delta} (95% CI [{r_low}, {r_high}], p={r_p}); "
                "ΔMRR {m_delta} (95% CI [{m_low}, {m_high}], p={m_p}); wins/losses/ties on "
                "{measure} {wins}/{losses}/{ties}",
                {
                    **_stats("r", c5),
                    **_stats("m", cm),
                    "measure": cp.get("measure", ""),
                    "wins": cp.get("wins"),
                    "losses": cp.get("losses"),
                    "ties": cp.get("ties"),
                },
            )
        )
    hb, hr = base.get("holdout") or {}, res.get("holdout") or {}
    out.append(
        Message(
            "**Holdout**: Recall@5 {r_a} → {r_b}, MRR {m_a} → {m_b}",
            {
                "r_a": f"{hb.get('recall@5', 0):.3f}",
                "r_b": f"{hr.get('recall@5', 0):.3f}",
                "m_a": f"{hb.get('mrr', 0):.3f}",
                "m_b": f"{hr.get('mrr', 0):.3f}",
            },
        )
    )
    return out


def _stats(prefix: str, c: Mapping[str, Any]) -> dict[str, str]:
    return {
        f"{prefix}_delta": f"{float(c.get('delta', 0)):+.3f}",
        f"{prefix}_low": f"{float(c.get('ci_low', 0)):+.3f}",
        f"{prefix}_high": f"{float(c.get('ci_high', 0)):+.3f}",
        f"{prefix}_p": f"{float(c.get('p_value', math.nan)):.3f}",
    }


def _reasons(criteria: list[Mapping[str, Any]], tr: Translate | None) -> str:
    """Each failed criterion as ``Decision.reasons`` words it."""
    return "; ".join(
        _criterion(c).render(tr)
        + (f" [{detail_message(c['detail']).render(tr)}]" if c.get("detail") else "")
        for c in criteria
        if not c.get("passed", True)
    )


def log_text(records: Iterable[Mapping[str, Any]], translate: Translate | None = None) -> str:
    """The whole log, without its ``# Optimization log`` title: the introduction, then one
    entry per logged record (what the Experiments page shows)."""
    entries = [
        entry_text(r, translate)
        for r in records
        if r.get("decision") in ("accepted", "rolled back", "restored")
    ]
    return LOG_INTRO.render(translate) + "".join(entries)
