"""The acceptance criteria's names, thresholds and details as templates: acceptance.py builds
them from these, the log and the UI read them back as messages (so they translate).

A criterion is stored by its English text (``experiments.jsonl`` holds ``"mrr improves
(CI low)"``); :func:`name_message`, :func:`threshold_message` and :func:`detail_message`
find the template a text was made from and return it as a
:class:`~workbench.eval.messages.Message` with the same parameters. A text no template made
(a record from an older version) stays as it is.
"""

from __future__ import annotations

import re
import string
from functools import cache

from workbench.eval.messages import Message, join

NAMES = {
    "improves": "{measure} improves (CI low)",
    "not_worse": "{measure} not significantly worse (p)",
    "sign_test": "sign test: losses > wins on {measure} (p)",
    "worst_slice": "worst slice worse (adjusted p)",
    "latency": "latency p50 delta (ms)",
    "holdout": "holdout {measure} not significantly worse (p)",
    "delta": "{measure} delta",
    "regressed": "regressed queries",
    "largest": "largest query regression",
    "slice_delta": "worst slice delta ({measure})",
}
THRESHOLDS = {
    "improves": "> 0 or p < {alpha}",
    "not_worse_or_gain": ">= {alpha} or delta >= 0",
}
DETAILS = {
    "counts": "{wins} wins / {losses} losses / {ties} ties",
    "no_slice": "no slice of {fields} has >= {size} queries",
    "worst_slice": "{slice} Δ {delta} (n={size}, raw p={p}); {slices} slices, {correction}",
    "no_holdout": "no holdout queries",
    "no_holdout_run": "no holdout run given",
}
CORRECTIONS = {"holm": "Holm", "bh": "Benjamini-Hochberg", "none": "uncorrected"}
# Parameter values that are words themselves (the rest are numbers, measures and slices).
WORD_VALUES = ("uncorrected",)


def texts() -> list[str]:
    """Every template and word here: the UI's catalog needs a translation of each."""
    return [*NAMES.values(), *THRESHOLDS.values(), *DETAILS.values(), *WORD_VALUES]


@cache
def _pattern(template: str) -> re.Pattern[str]:
    """A regex matching what ``template.format(...)`` produced, one group per field."""
    out = ""
    for literal, field, _, _ in string.Formatter().parse(template):
        out += re.escape(literal)
        if field is not None:
            # a measure is one token ("recall@5"); other fields may hold spaces and commas
            out += rf"(?P<{field}>\S+)" if field == "measure" else rf"(?P<{field}>.+?)"
    return re.compile(out)


def _message(text: str, templates: dict[str, str]) -> Message:
    for template in templates.values():
        if m := _pattern(template).fullmatch(text):
            params: dict[str, object] = {
                k: Message(v) if v in WORD_VALUES else v for k, v in m.groupdict().items()
            }
            if "fields" in params:  # golden-set field names, each a word of its own
                names = [Message(f) for f in str(params["fields"]).split(", ")]
                params["fields"] = join(names, ", ")
            return Message(template, params)
    return Message("{text}", {"text": text})  # not ours: shown as it is


def name_message(name: str) -> Message:
    return _message(name, NAMES)


def threshold_message(threshold: str) -> Message:
    return _message(threshold, THRESHOLDS)


def detail_message(detail: str) -> Message:
    return _message(detail, DETAILS)
