"""`wikirag calibrate-refusal`: fit the chat's evidence judge on a golden set, measure it by
cross-validation and store it as ``experiments/<kb>/refusal.yaml`` (workbench/answer/refusal.py)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from workbench.commands import common
from workbench.eval import golden


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "calibrate-refusal",
        help="fit when the chat refuses (golden set's unanswerable items) and store it",
    )
    common.add_workspace_args(p, dataset=True)
    p.add_argument(
        "--add-dataset",
        action="append",
        default=[],
        metavar="FILE",
        help="another golden set to calibrate on too (repeatable), e.g. more unanswerable items",
    )
    p.add_argument(
        "--heldout",
        action="append",
        default=[],
        metavar="FILE",
        help="a golden set to report refusal rates on, never fitted on (repeatable)",
    )
    p.add_argument("--folds", type=int, default=5, help="cross-validation folds (default 5)")
    p.add_argument(
        "--max-false-refusal",
        type=float,
        default=None,
        help="share of answerable questions the refusal cut may refuse (default 0.05)",
    )
    p.add_argument("--top-k", type=int, default=5, help="chapters retrieved, as the chat")
    p.add_argument("--dry-run", action="store_true", help="measure only; write nothing")
    common.add_json_arg(p, "the calibration as JSON on stdout")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.search import Engine  # deferred: loads lancedb (~2 s)
    from workbench.answer.refusal import (
        CALIBRATION_FILE,
        MAX_FALSE_REFUSAL,
        cross_validate,
        fit,
        rate_summary,
        refused_by,
    )

    cap = MAX_FALSE_REFUSAL if args.max_false_refusal is None else args.max_false_refusal
    if not 0.0 <= cap < 1.0:
        raise ValueError("--max-false-refusal must be in [0, 1)")
    if args.folds < 2:
        raise ValueError("--folds must be at least 2")
    ws = common.workspace(args)
    cfg = common.effective_config(args, ws)
    # Every set read and checked before the engine opens: a missing or invalid
    # --add-dataset / --heldout file is a one-line error at once, not after a long load.
    sets = [golden.checked(golden.load(ws.dataset))]
    sets += [golden.checked(golden.load(Path(f))) for f in args.add_dataset]
    held = [golden.checked(golden.load(Path(f))) for f in args.heldout]
    engine = Engine.open(ws.kb, ws.index, cfg)
    items = [(g.name, it) for g in sets for it in g.items]
    if sum(it.unanswerable for _, it in items) < 2:
        raise ValueError(
            f"{ws.dataset} has fewer than 2 `unanswerable: true` items; add some to calibrate "
            "(or --add-dataset a set of them)"
        )

    feats, answerable = _features_of(engine, items, "calibration", args.top_k)
    cv = cross_validate(feats, answerable, k=args.folds, max_false_refusal=cap)
    per_set = _rates_per_set(sets, items, cv.refused, answerable)
    provenance = _provenance(args, ws, cfg, sets, answerable, cap, cv.summary(), per_set)
    model = fit(feats, answerable, max_false_refusal=cap)
    heldout = {}
    for g in held:
        hf, ha = _features_of(engine, [(g.name, it) for it in g.items], g.name, args.top_k)
        heldout[g.name] = rate_summary(refused_by(model, hf), ha)
    if heldout:
        provenance["heldout"] = heldout
    model = replace(model, provenance=provenance)
    path = ws.experiments / CALIBRATION_FILE
    if not args.dry_run:
        model.save(path)
        common.info(f"refusal calibration: {path}")
    if args.json:
        common.print_json(model.to_dict())
        return 0
    lines = _summary_lines(cv.summary(), per_set if len(sets) > 1 else {}, heldout)
    lines.append(
        f"fitted on all {len(items)} items: extractive chat refuses when p(answerable) < "
        f"{model.refuse_below:.3f}; with an LLM, refuses below {model.grey_low:.3f} and asks "
        f"the LLM judge up to {model.grey_high:.3f}"
    )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


def _features_of(
    engine: Any, named: list[tuple[str, Any]], label: str, top_k: int
) -> tuple[list[Any], list[bool]]:
    """Each item's evidence features (as the chat retrieves them) and whether it is answerable."""
    from workbench.answer.loop import retrieve_sources
    from workbench.answer.refusal import evidence_features

    feats, answerable = [], []
    for n, (_, it) in enumerate(named, 1):
        sources = retrieve_sources(engine, it.query, top_k)
        feats.append(evidence_features(it.query, sources, engine))
        answerable.append(not it.unanswerable)
        print(f"\r{label} features {n}/{len(named)}", end="", file=sys.stderr)
    print(file=sys.stderr)
    return feats, answerable


def _rates_per_set(
    sets: list[Any],
    items: list[tuple[str, Any]],
    refused: Sequence[bool],
    answerable: list[bool],
) -> dict[str, dict[str, Any]]:
    """The cross-validated refusal rates of each golden set's own items."""
    from workbench.answer.refusal import rate_summary

    return {
        g.name: rate_summary(
            [r for r, (name, _) in zip(refused, items, strict=True) if name == g.name],
            [a for a, (name, _) in zip(answerable, items, strict=True) if name == g.name],
        )
        for g in sets
    }


def _provenance(
    args: argparse.Namespace,
    ws: Any,
    cfg: Any,
    sets: list[Any],
    answerable: list[bool],
    cap: float,
    cv_summary: dict[str, Any],
    per_set: dict[str, dict[str, Any]],
) -> dict[str, Any]:
    """What the calibration was fitted on and how it measured, stored with it."""
    from workbench.answer.refusal import embedder_of

    return {
        "dataset": str(ws.dataset),
        "dataset_hash": sets[0].content_hash,
        **({"added_datasets": list(args.add_dataset)} if args.add_dataset else {}),
        "kb": ws.name,
        "config_hash": cfg.hash,
        "embedder": embedder_of(cfg),
        "items": {
            "answerable": sum(answerable),
            "unanswerable": len(answerable) - sum(answerable),
        },
        "max_false_refusal": cap,
        "fitted_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cross_validation": {**cv_summary, **({"per_set": per_set} if len(sets) > 1 else {})},
    }


def _summary_lines(
    s: dict[str, Any], per_set: dict[str, dict[str, Any]], heldout: dict[str, dict[str, Any]]
) -> list[str]:
    """The cross-validated rates, each set's when there are several, and the held-out sets'."""
    lines = [
        f"cross-validated ({s['folds']}-fold): unanswerable refused "
        f"{s['unanswerable_refused']} ({s['unanswerable_refused_rate']:.3f}), answerable "
        f"wrongly refused {s['answerable_wrongly_refused']} "
        f"({s['answerable_wrongly_refused_rate']:.3f})"
    ]
    lines += [f"  {name}: {_rates(r)}" for name, r in per_set.items()]
    lines += [f"held out {name} (never fitted on): {_rates(r)}" for name, r in heldout.items()]
    return lines


def _rates(r: dict[str, Any]) -> str:
    def rate(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.3f}"

    return (
        f"unanswerable refused {r['unanswerable_refused']} "
        f"({rate(r['unanswerable_refused_rate'])}), answerable wrongly refused "
        f"{r['answerable_wrongly_refused']} ({rate(r['answerable_wrongly_refused_rate'])})"
    )
