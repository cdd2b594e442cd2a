"""A scorecard (its dict form) as Markdown: the CLI, reports and the compare table use it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def scorecard_markdown(card: Mapping[str, Any], heading: str = "#") -> str:
    """Markdown of a scorecard dict (``Scorecard.to_dict()``), also used by reports."""
    out = [
        f"{heading} Scorecard: {card['total']:.1f} / 100 — grade {card['grade']}",
        "",
        f"Run `{card.get('run_id', '')}`, config `{card.get('config_hash', '')}`, "
        f"mode {card.get('mode', '')}.",
        "",
        "| Dimension | Weight | Score | Weighted | Rule |",
        "|---|---:|---:|---:|---|",
    ]
    for d in card["dimensions"]:
        out.append(
            f"| {d['name']} | {d['weight']} | {d['score']:.1f} | {d['weighted']:.2f} | "
            f"{md_cell(d['rule'])} |"
        )
    out += ["", f"{heading}# Top weaknesses", ""]
    for n, d in enumerate(card["weaknesses"], 1):
        out.append(f"{n}. **{d['name']}** ({d['score']:.1f}; loses {d['loss']:.2f} points)")
        steps = d.get("next_steps") or []
        for step in steps:
            run = f"`{step['command']}` — " if step.get("command") else ""
            out.append(f"   - next {step['kind'].replace('_', ' ')}: {run}{md_cell(step['text'])}")
        exp = d.get("next_experiment")
        if exp and not steps:
            sets = " ".join(f"--set {k}={_yaml_value(v)}" for k, v in exp["overrides"].items())
            out.append(f"   - next experiment: `wikirag experiment try {sets}` — {exp['why']}")
        if d.get("action"):
            out.append(f"   - {d['action']}")
    if not card["weaknesses"]:
        out.append("None: every dimension scores 100.")
    out += ["", f"{heading}# Evidence and formulas", ""]
    for d in card["dimensions"]:
        ev = ", ".join(f"{k}={_fmt(v)}" for k, v in d["evidence"].items())
        out.append(f"- **{d['name']}** ({d['score']:.1f}): {md_cell(d['formula'])}. Evidence: {ev}")
    return "\n".join(out) + "\n"


def md_cell(text: Any) -> str:
    """Text safe inside a Markdown table cell: pipes and newlines would break the row, and
    Markdown renders raw HTML, so ``<`` (which opens every tag) becomes ``&lt;``."""
    text = str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")
    return text.replace("<", "&lt;")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def _yaml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)
