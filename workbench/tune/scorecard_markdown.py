"""A scorecard (its dict form) as Markdown: the CLI, reports and the compare table use it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workbench.eval.messages import Message, Translate

# The kinds of next step (workbench.tune.next_steps.KINDS) as the list reads them.
STEP_WORDS = {
    "experiment": Message("next experiment"),
    "sweep": Message("next sweep"),
    "optimize": Message("next optimize"),
    "grow_golden_set": Message("next grow golden set"),
}


def scorecard_markdown(
    card: Mapping[str, Any], heading: str = "#", translate: Translate | None = None
) -> str:
    """Markdown of a scorecard dict (``Scorecard.to_dict()``), also used by reports.

    ``translate`` renders the frame (headings, column names, labels) in the UI's language;
    the card's own texts are already in it when ``to_dict`` got the same translator.
    """

    def tr(message: Message) -> str:
        return message.render(translate)

    columns = (
        Message("Dimension"),
        Message("Weight"),
        Message("Score"),
        Message("Weighted"),
        Message("Rule"),
    )
    out = [
        heading
        + " "
        + tr(
            Message(
                "Scorecard: {total} / 100 — grade {grade}",
                {"total": f"{card['total']:.1f}", "grade": card["grade"]},
            )
        ),
        "",
        tr(
            Message(
                "Run `{run}`, config `{hash}`, mode {mode}.",
                {
                    "run": card.get("run_id", ""),
                    "hash": card.get("config_hash", ""),
                    "mode": card.get("mode", ""),
                },
            )
        ),
        "",
        "| " + " | ".join(tr(c) for c in columns) + " |",
        "|---|---:|---:|---:|---|",
    ]
    for d in card["dimensions"]:
        out.append(
            f"| {d['name']} | {d['weight']} | {d['score']:.1f} | {d['weighted']:.2f} | "
            f"{md_cell(d['rule'])} |"
        )
    out += ["", f"{heading}# " + tr(Message("Top weaknesses")), ""]
    for n, d in enumerate(card["weaknesses"], 1):
        out.append(
            tr(
                Message(
                    "{n}. **{name}** ({score}; loses {loss} points)",
                    {
                        "n": n,
                        "name": d["name"],
                        "score": f"{d['score']:.1f}",
                        "loss": f"{d['loss']:.2f}",
                    },
                )
            )
        )
        steps = d.get("next_steps") or []
        for step in steps:
            run = f"`{step['command']}` — " if step.get("command") else ""
            word = STEP_WORDS.get(step["kind"], Message("next " + step["kind"].replace("_", " ")))
            out.append(f"   - {tr(word)}: {run}{md_cell(step['text'])}")
        exp = d.get("next_experiment")
        if exp and not steps:
            sets = " ".join(f"--set {k}={_yaml_value(v)}" for k, v in exp["overrides"].items())
            said = tr(STEP_WORDS["experiment"])
            out.append(f"   - {said}: `wikirag experiment try {sets}` — {exp['why']}")
        if d.get("action"):
            out.append(f"   - {d['action']}")
    if not card["weaknesses"]:
        out.append(tr(Message("None: every dimension scores 100.")))
    out += ["", f"{heading}# " + tr(Message("Evidence and formulas")), ""]
    for d in card["dimensions"]:
        # Keys are identifiers (as in --json), set as code so no language reads them as prose.
        ev = ", ".join(f"`{k}`={md_cell(_fmt(v))}" for k, v in d["evidence"].items())
        out.append(
            tr(
                Message(
                    "- **{name}** ({score}): {formula}. Evidence: {evidence}",
                    {
                        "name": d["name"],
                        "score": f"{d['score']:.1f}",
                        "formula": md_cell(d["formula"]),
                        "evidence": ev,
                    },
                )
            )
        )
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
