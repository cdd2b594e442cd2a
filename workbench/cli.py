"""The `wikirag` command: every workbench capability, headless."""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from typing import NoReturn

import workbench.commands as commands_pkg
from engine.errors import EngineError


class _Parser(argparse.ArgumentParser):
    """Usage errors follow the CLI's contract too: one line on stderr, exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="wikirag",
        description="Measure and tune hybrid retrieval over a Markdown wiki.",
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for mod in sorted(pkgutil.iter_modules(commands_pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith("_") or mod.name == "common":
            continue
        module = importlib.import_module(f"workbench.commands.{mod.name}")
        register = getattr(module, "register", None)
        if register is not None:
            register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        rc = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit where it cannot be caught
    except BrokenPipeError:
        return _reader_went_away()
    except (EngineError, ValueError, OSError) as exc:
        if args.debug:
            raise
        message = " ".join(str(exc).split())  # the contract is one line, whatever raised it
        sys.stderr.write(f"wikirag: error: {message}\n")
        return 2
    except KeyboardInterrupt:
        sys.stderr.write("wikirag: interrupted\n")
        return 130
    return int(rc or 0)


def _reader_went_away() -> int:
    """`wikirag search ... | head -1`: the reader closed the pipe; stop quietly like Unix tools.

    stdout is pointed at /dev/null so the interpreter's final flush does not raise again.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced by something without a descriptor
        pass
    finally:
        os.close(devnull)
    return 128 + 13  # what a shell reports for a process ended by SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
