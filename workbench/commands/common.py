"""Arguments and output helpers shared by sub-commands."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from engine.config import SEARCH_MODES, EngineConfig, parse_override
from workbench.eval.golden import SPLITS
from workbench.eval.query_log import DEFAULT_RETENTION_DAYS, LOG_ENV
from workbench.workspace import Workspace, resolve

_JSON_HELP = "machine-readable output on stdout"


def add_kb_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kb", default="wiki", help="knowledge base folder (default: wiki)")


def add_index_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--index", default=None, help="index folder or LanceDB URI (default: .wikirag/<kb>)"
    )


def add_dataset_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default=None, help="golden set YAML (default: datasets/<kb>.yaml)")


def add_run_arg(
    p: argparse.ArgumentParser,
    help_text: str = "run id or config label, e.g. `baseline` (default: the latest run)",
) -> None:
    """``--run ID``: a saved run record by id (a file stem under experiments/<kb>/runs/) or
    config label (read with :func:`workbench.commands.scorecard_cmd.load_run_by_id`)."""
    p.add_argument("--run", metavar="ID", default=None, help=help_text)


def add_search_mode_arg(
    p: argparse.ArgumentParser, default_is: str = "the config's search.mode"
) -> None:
    """``--mode``: one of the engine's search modes, None when not given."""
    p.add_argument(
        "--mode", default=None, choices=SEARCH_MODES, help=f"search mode (default: {default_is})"
    )


def add_rerank_arg(p: argparse.ArgumentParser) -> None:
    """``--rerank`` / ``--no-rerank``; neither: on when ``rerank.provider`` is not none."""
    p.add_argument(
        "--rerank",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="force rerank on/off (default: on when rerank.provider is not none)",
    )


def add_allow_invalid_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--allow-invalid",
        action="store_true",
        help="use a golden set with errors, skipping (and naming) the invalid items",
    )


def add_answer_args(p: argparse.ArgumentParser) -> None:
    """``--mode`` and ``--top-k`` of an answer (`ask`, `chats replay`)."""
    from workbench.answer.chat import ANSWER_MODES, DEFAULT_ANSWER_MODE, DEFAULT_TOP_K

    p.add_argument(
        "--mode",
        choices=ANSWER_MODES,
        default=DEFAULT_ANSWER_MODE,
        help="loop: retrieve/judge/rewrite then answer (default); tools: the LLM calls search",
    )
    p.add_argument(
        "--top-k",
        type=int,
        default=DEFAULT_TOP_K,
        help=f"chapters given as sources (default {DEFAULT_TOP_K})",
    )


def add_split_arg(p: argparse.ArgumentParser, default: str = "all") -> None:
    """``--split``: the golden set's tune or holdout items, or all of them."""
    p.add_argument("--split", default=default, choices=[*SPLITS, "all"])


def add_workspace_args(p: argparse.ArgumentParser, dataset: bool = False) -> None:
    add_kb_arg(p)
    add_index_arg(p)
    p.add_argument(
        "--config",
        default=None,
        help="engine config YAML (default: the KB's accepted baseline, else built-in defaults)",
    )
    add_set_arg(p)
    if dataset:
        add_dataset_arg(p)


def add_set_arg(
    p: argparse.ArgumentParser, example: str = "fusion.k=30", *, required: bool = False
) -> None:
    """``--set KEY=VALUE`` (repeatable), read by :func:`effective_config`."""
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        required=required,
        metavar="KEY=VALUE",
        help=f"override one config key, e.g. --set {example} (repeatable)",
    )


def add_kb_args(p: argparse.ArgumentParser, *, index: bool = False, json: bool = True) -> None:
    """--kb, --dataset and --json (and --index when asked) for commands that always use the
    KB's accepted baseline config (experiments, golden-set tools)."""
    add_kb_arg(p)
    if index:
        add_index_arg(p)
    add_dataset_arg(p)
    if json:
        add_json_arg(p)


def add_json_arg(p: argparse.ArgumentParser, help_text: str | None = _JSON_HELP) -> None:
    """``--json``: the command's result as JSON on stdout (progress and notes go to stderr,
    :func:`info`). ``help_text`` None: no help line, as `config show`, `chapter` and `stats`
    have always had."""
    p.add_argument("--json", action="store_true", help=help_text)


def workspace(args: argparse.Namespace) -> Workspace:
    """The workspace of ``args``, after finishing an accept a crash interrupted (the
    experiment log is the source of truth: no command reads a baseline it left stale)."""

    def resolved() -> Workspace:
        return resolve(
            kb=args.kb,
            index=getattr(args, "index", None),
            config=getattr(args, "config", None),
            dataset=getattr(args, "dataset", None),
        )

    ws = resolved()
    if (ws.experiments / "experiments.jsonl").is_file():
        from workbench.tune.experiment_store import ExperimentStore

        repaired = ExperimentStore(ws.experiments).repair()
        if repaired:
            info(repaired)
            ws = resolved()
    return ws


def set_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The ``--set KEY=VALUE`` pairs of ``args`` (none where the command has no ``--set``)."""
    return dict(parse_override(s) for s in getattr(args, "overrides", []) or [])


def with_set(cfg: EngineConfig, args: argparse.Namespace) -> EngineConfig:
    """``cfg`` with the ``--set`` overrides of ``args`` applied."""
    overrides = set_overrides(args)
    return cfg.with_overrides(overrides) if overrides else cfg


def effective_config(args: argparse.Namespace, ws: Workspace) -> EngineConfig:
    return with_set(ws.load_config(), args)


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False, indent=2, default=str) + "\n")


def info(msg: str) -> None:
    """Human-facing progress/info goes to stderr so --json stdout stays clean."""
    sys.stderr.write(msg + "\n")


def add_log_args(p: argparse.ArgumentParser) -> None:
    """``--log-queries`` / ``--log-retention-days``: the opt-in log of questions asked."""
    p.add_argument(
        "--log-queries",
        action="store_true",
        help=f"record each question (no answers, no keys) beside the index (also ${LOG_ENV}=1)",
    )
    p.add_argument(
        "--log-retention-days",
        type=int,
        default=None,
        metavar="N",
        help=f"drop logged questions older than N days (default {DEFAULT_RETENTION_DAYS})",
    )
