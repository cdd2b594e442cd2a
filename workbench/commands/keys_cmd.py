"""`wikirag keys allow|revoke|list`: which API key variable may be sent to which host.

The approvals live in the user's config dir (engine/credentials.py), never in the
repository, so a pulled config cannot approve itself.
"""

from __future__ import annotations

import argparse

from engine.credentials import (
    APPROVED_ENV,
    DEFAULT_KEY_ENV,
    allow,
    approvals_path,
    host_of,
    read_approvals,
    revoke,
)
from workbench.commands.common import add_json_arg, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "keys", help="approve which API key variable may be sent to which host (LLM, providers)"
    )
    ksub = p.add_subparsers(dest="keys_command", metavar="ACTION")
    for name, func, verb in (("allow", _allow, "approve"), ("revoke", _revoke, "withdraw")):
        a = ksub.add_parser(name, help=f"{verb} sending --key-env's value to --host")
        a.add_argument(
            "--key-env",
            default=DEFAULT_KEY_ENV,
            metavar="VAR",
            help=f"environment variable holding the key (default: {DEFAULT_KEY_ENV})",
        )
        a.add_argument("--host", required=True, help="host name (or a URL: its host is taken)")
        a.set_defaults(func=func)
    ls = ksub.add_parser("list", help="show the approvals and where they are kept")
    add_json_arg(ls)
    ls.set_defaults(func=_list)
    p.set_defaults(func=lambda a: p.print_help())


def _host(value: str) -> str:
    return host_of(value) if "://" in value else value.strip().lower()


def _allow(args: argparse.Namespace) -> int:
    path = allow(args.key_env, _host(args.host))
    print(f"approved: {args.key_env} may be sent to {_host(args.host)} (kept in {path})")
    return 0


def _revoke(args: argparse.Namespace) -> int:
    path = revoke(args.key_env, _host(args.host))
    print(f"revoked: {args.key_env} to {_host(args.host)} (kept in {path})")
    return 0


def _list(args: argparse.Namespace) -> int:
    pairs = read_approvals()
    if args.json:
        print_json(
            {
                "file": str(approvals_path()),
                "approved": [{"key_env": k, "host": h} for k, h in pairs],
            }
        )
        return 0
    print(f"# {approvals_path()} (plus {APPROVED_ENV} in the environment)")
    for key_env, host in pairs:
        print(f"{key_env} -> {host}")
    return 0
