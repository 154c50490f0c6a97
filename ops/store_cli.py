"""`postroom store url`: the URL of the store this data dir's `postroom` processes use, for
mongosh, Compass or a PyMongo script.

The embedded store listens on no TCP port, by design: nx-27017 has no authentication, so
its Unix socket in the owner-only data dir is what keeps other users out
(ops/embedded_store.py). Its URL names that socket and the database, and reaches it for
this user on this machine. With POSTROOM_MONGODB_URL set, that URL is printed, its
password masked: a URL on a screen or in a shell's history is no place for it."""

from __future__ import annotations

import sys
import urllib.parse

from . import config, embedded_store

MASK = "****"


def masked(url: str) -> tuple[str, bool]:
    """`url` with the password of its user info replaced by MASK; True when it had one."""
    parts = urllib.parse.urlsplit(url)
    userinfo, _, hosts = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    if not password:
        return url, False
    return urllib.parse.urlunsplit(parts._replace(netloc=f"{user}:{MASK}@{hosts}")), True


def cmd_store_url(args) -> int:
    settings = config.load(start_store=False)
    if settings.mongodb_url:
        url, hidden = masked(settings.mongodb_url)
        print(url)
        if hidden:
            print(f"(the password in POSTROOM_MONGODB_URL is masked as {MASK}; the database is "
                  f"{settings.mongodb_database})", file=sys.stderr)
        return 0
    try:
        socket = embedded_store.socket_url(settings.data_dir)
    except RuntimeError as error:  # the data dir's path is too long for a socket
        print(error, file=sys.stderr)
        return 2
    print(f"{socket}/{settings.mongodb_database}")
    if not embedded_store.answers(socket):
        print(f"(the embedded store of {settings.data_dir} is not running: `postroom up`, or any command "
              "that reads the store, starts it)", file=sys.stderr)
    return 0


def add_commands(sub) -> None:
    store = sub.add_parser("store", help="the store Postroom uses").add_subparsers(dest="action", required=True)
    url = store.add_parser(
        "url", help="print the store's URL (for mongosh, Compass, PyMongo)",
        description="Prints the URL of the store of this data dir: the embedded store's Unix socket and "
                    "database (it listens on no TCP port, by design: it has no authentication; the URL "
                    "reaches it for this user on this machine), or POSTROOM_MONGODB_URL with its password "
                    "masked.")
    url.set_defaults(func=cmd_store_url)
