"""`postroom operator create NAME`: an operator account for the console's operator view
(queues, processes, backlogs across workspaces). The password is read from the terminal
(twice), or from standard input with `--password-stdin`; only its scrypt hash is stored.

Exit codes: 0 created; 1 the name is taken; 2 bad usage (a password too short, or the two
entries differ)."""

from __future__ import annotations

import getpass
import json
import sys

from pipelines.core import passwords
from pipelines.workflows.console_sessions import create_operator

from . import config
from .cli_support import run_store


def _password(args) -> str | None:
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if getpass.getpass("again: ") != first:
        print("the two passwords differ", file=sys.stderr)
        return None
    return first


def cmd_operator_create(args) -> int:
    password = _password(args)
    if password is None:
        return 2
    if len(password) < passwords.MIN_LENGTH:
        print(f"a password has at least {passwords.MIN_LENGTH} characters", file=sys.stderr)
        return 2
    made = run_store(config.load(), lambda db: create_operator(db, args.name, password))
    if made is None:
        print(f"an operator named {args.name} exists already", file=sys.stderr)
        return 1
    print(json.dumps({"id": made["_id"], "name": made["name"]}) if args.json else f"operator {made['name']} created")
    return 0


def add_commands(sub) -> None:
    operator = sub.add_parser("operator", help="operator accounts of the console").add_subparsers(
        dest="action", required=True)
    create = operator.add_parser("create", help="an operator who signs in to the console's operator view")
    create.add_argument("name")
    create.add_argument("--password-stdin", dest="password_stdin", action="store_true",
                        help="read the password from the first line of standard input instead of asking")
    create.add_argument("--json", action="store_true")
    create.set_defaults(func=cmd_operator_create)
