"""Every surface offers exactly the search modes and expand choices of engine.config, the answer
loop's modes, and spells the options several commands share the same way."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import anyio
import pytest

from engine.config import EXPAND_MODES, SEARCH_MODES, EngineConfig, field_spec
from engine.errors import ConfigError
from tests.serve.conftest import make_kb
from workbench.answer.chat import ANSWER_MODES, DEFAULT_ANSWER_MODE, DEFAULT_TOP_K, answer
from workbench.cli import build_parser
from workbench.serve.app import create_app
from workbench.serve.mcp import build_mcp_server
from workbench.serve.served import ServedEngine


def _cli_choices() -> dict[tuple[str, str], tuple[str, ...]]:
    """(command, option) -> choices of every option that picks a search mode or expand."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    out = {}
    for name, parser in sub.choices.items():
        for action in parser._actions:
            picks_mode = any(c in SEARCH_MODES for c in action.choices or ())
            if action.dest == "expand" or picks_mode:
                out[(name, action.option_strings[0])] = tuple(action.choices)
    return out


def _enum(schema: dict[str, Any], defs: dict[str, Any]) -> tuple[str, ...]:
    """The enum of an optional Literal property, through anyOf / $ref."""
    for option in schema.get("anyOf", [schema]):
        if "$ref" in option:
            option = defs[option["$ref"].rsplit("/", 1)[-1]]
        if "enum" in option:
            return tuple(option["enum"])
    raise AssertionError(f"no enum in {schema}")


def test_config_fields_take_their_choices_from_the_one_definition() -> None:
    assert SEARCH_MODES == ("hybrid", "vector", "keyword")
    assert EXPAND_MODES == ("none", "children", "siblings", "parent")
    assert tuple(field_spec("search.mode")["choices"]) == SEARCH_MODES
    assert tuple(field_spec("search.expand")["choices"]) == EXPAND_MODES


def test_cli_offers_exactly_the_configs_choices() -> None:
    got = _cli_choices()
    assert got[("search", "--mode")] == SEARCH_MODES
    assert got[("search", "--expand")] == EXPAND_MODES
    assert got[("eval", "--modes")] == SEARCH_MODES
    for (command, option), choices in got.items():
        want = EXPAND_MODES if option == "--expand" else SEARCH_MODES
        assert choices == want, (command, option)


def test_http_schema_offers_exactly_the_configs_choices(tmp_path: Path) -> None:
    kb = make_kb(tmp_path, index=False)  # a server without an index still starts
    app = create_app(kb.ws, kb.cfg, llm=None, admin_token="")
    schemas = app.openapi()["components"]["schemas"]
    props = schemas["SearchRequest"]["properties"]
    assert _enum(props["search_mode"], schemas) == SEARCH_MODES
    assert _enum(props["expand"], schemas) == EXPAND_MODES


def test_mcp_tool_schema_offers_exactly_the_configs_choices(tmp_path: Path) -> None:
    kb = make_kb(tmp_path, index=False)
    server = build_mcp_server(ServedEngine(kb.ws, kb.cfg), llm=None)
    tools = {t.name: t for t in anyio.run(server.list_tools)}
    schema = tools["search_knowledge"].input_schema
    defs = schema.get("$defs", {})
    assert _enum(schema["properties"]["search_mode"], defs) == SEARCH_MODES
    assert _enum(schema["properties"]["expand"], defs) == EXPAND_MODES


def test_engine_rejects_what_the_config_does_not_offer() -> None:
    with pytest.raises(ConfigError):
        EngineConfig().with_overrides({"search.mode": "semantic"})


def _subcommand(*path: str) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[name]
    return parser


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


def test_every_answer_surface_offers_the_answer_loops_modes(tmp_path: Path) -> None:
    for path in (("ask",), ("chats", "replay")):
        mode = _option(_subcommand(*path), "--mode")
        assert tuple(mode.choices or ()) == ANSWER_MODES, path
        assert mode.default == DEFAULT_ANSWER_MODE
        assert _option(_subcommand(*path), "--top-k").default == DEFAULT_TOP_K
    kb = make_kb(tmp_path, index=False)
    schemas = create_app(kb.ws, kb.cfg, llm=None, admin_token="").openapi()["components"]["schemas"]
    ask = schemas["AskRequest"]["properties"]
    assert tuple(ask["mode"]["enum"]) == ANSWER_MODES
    assert ask["top_k"]["default"] == DEFAULT_TOP_K
    assert ask["mode"]["default"] == DEFAULT_ANSWER_MODE


def test_answer_rejects_a_mode_the_surfaces_do_not_offer() -> None:
    with pytest.raises(ValueError, match="loop, tools"):
        answer("q", retriever=None, mode="agent")  # type: ignore[arg-type]


@pytest.mark.parametrize("command", ["eval", "search"])
def test_rerank_is_forced_on_or_off_or_left_to_the_config(command: str) -> None:
    parse = build_parser().parse_args
    extra = ["q"] if command == "search" else []
    assert parse([command, *extra]).rerank is None
    assert parse([command, *extra, "--rerank"]).rerank is True
    assert parse([command, *extra, "--no-rerank"]).rerank is False


@pytest.mark.parametrize(
    "path", [("failures",), ("scorecard",), ("report",)], ids=lambda p: " ".join(p)
)
def test_commands_that_read_a_saved_run_name_it_the_same_way(path: tuple[str, ...]) -> None:
    run = _option(_subcommand(*path), "--run")
    assert (run.metavar, run.default) == ("ID", None)
    assert build_parser().parse_args([*path, "--run", "20260101-x"]).run == "20260101-x"
