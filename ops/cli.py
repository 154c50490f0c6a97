"""`postroom` — run the service and administer it. `postroom --help` lists the commands."""

from __future__ import annotations

import argparse
import json
import shutil
import sys

from mongo import api_keys as key_store
from mongo import workspaces
from pipelines.audience.addresses import normalize
from pipelines.core import api_keys
from pipelines.core.settings import Settings
from pipelines.messages.sender import workspace_local_part

from . import (
    config,
    contacts_cli,
    embedded_store,
    inbound_cli,
    logs,
    operator_cli,
    settings_cli,
    status_cli,
    store_cli,
    worker_pool,
)
from .cli_support import one_or_missing, run_store


def cmd_up(args) -> int:
    # local import: serve loads the front, the broker and the scheduler; imported at the top, they
    # made every other command start three times slower (import ops.cli: 4.6 s against 1.5 s, loaded box)
    from .serve import run_up
    settings = config.load(start_store=False, listen=(args.host, args.port))
    owned = None
    if not settings.mongodb_url:
        # a store already serving this data dir (started by a CLI command) is used, not a
        # second one; one started here is this process's, stopped when it stops
        owned, url = embedded_store.running_or_start(settings.data_dir, detached=False)
        settings = settings.replace(mongodb_url=url)
    try:
        run_up(settings, args.host, args.port, args.threads)
    finally:
        if owned is not None:
            owned.terminate()
            owned.wait(timeout=10)
            embedded_store.forget(settings.data_dir)
    return 0


def cmd_front(args) -> int:
    from .serve import event_loop, run_front  # local import: the service stack, only for this command (see cmd_up)
    event_loop.run(run_front(config.load(listen=(args.host, args.port)), args.host, args.port))
    return 0


def cmd_scheduler(args) -> int:
    from .serve import event_loop, run_scheduler  # local import: the service stack, only for this command (see cmd_up)
    event_loop.run(run_scheduler(config.load()))
    return 0


def cmd_worker(args) -> int:
    from actors.broker import QUEUES  # local import: the broker stack, only for this command (see cmd_up)
    settings = config.load()
    if not settings.amqp_url:
        print("postroom worker needs POSTROOM_AMQP_URL (RabbitMQ); `postroom up` runs an "
              "in-process broker instead.", file=sys.stderr)
        return 2
    queues = [q.strip() for q in (args.queues or ",".join(QUEUES)).split(",") if q.strip()]
    unknown = [q for q in queues if q not in QUEUES]
    if unknown:
        print(f"unknown queue(s): {', '.join(unknown)}; known: {', '.join(QUEUES)}", file=sys.stderr)
        return 2
    if args.processes < 1 or args.threads < 1:
        print("-p and -t must be at least 1", file=sys.stderr)
        return 2
    return worker_pool.run(queues, args.processes, args.threads,
                           {**config.child_env(settings), **_worker_metrics_env(settings)})


def _worker_metrics_env(settings) -> dict[str, str]:
    """With POSTROOM_WORKER_METRICS_PORT: Dramatiq's Prometheus exposition server on that
    port, and prometheus_client in multiprocess mode from the first import in every
    worker process, over a directory of this pool's own (emptied at start)."""
    if not settings.worker_metrics_port:
        return {}
    directory = settings.data_dir / "metrics" / f"worker-{settings.worker_metrics_port}"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    return {"dramatiq_prom_port": str(settings.worker_metrics_port),
            "dramatiq_prom_host": settings.metrics_host,
            "dramatiq_prom_db": str(directory), "PROMETHEUS_MULTIPROC_DIR": str(directory)}


def cmd_indexes(args) -> int:
    from mongo.indexes import prepare_store  # local import: every store module, only for this command
    run_store(config.load(), prepare_store)
    print("indexes ensured")
    return 0


def cmd_workspace_create(args) -> int:
    if args.from_email is not None:
        try:
            args.from_email = normalize(args.from_email)
        except ValueError as error:
            print(f"--from-email: {error}", file=sys.stderr)
            return 2

    async def work(db):
        ws = await workspaces.create(db, args.name, from_email=args.from_email)
        local = workspace_local_part(ws["name"], ws["_id"])
        await workspaces.update_settings(db, ws["_id"], {"sending_local_part": local})
        return ws
    ws = run_store(config.load(), work)
    print(json.dumps({"id": ws["_id"], "name": ws["name"]}) if args.json else f"workspace {ws['_id']} ({ws['name']})")
    return 0


def cmd_workspace_list(args) -> int:
    rows = run_store(config.load(), workspaces.list_all)
    if args.json:
        print(json.dumps([{"id": ws["_id"], "name": ws["name"], "created_at": ws["created_at"]} for ws in rows]))
        return 0
    for ws in rows:
        print(f"{ws['_id']}  {ws['name']}")
    return 0


def cmd_key_create(args) -> int:
    permissions = args.permissions.split(",") if args.permissions else ["*"]
    bad = [p for p in permissions if not api_keys.is_valid_permission(p)]
    if bad:
        print(f"unknown permission(s): {', '.join(bad)}", file=sys.stderr)
        return 2
    if any(limit is not None and limit < 1 for limit in (args.rate_limit, args.email_rate_limit)):
        print("--rate-limit and --email-rate-limit must be at least 1 per minute", file=sys.stderr)
        return 2

    async def work(db):
        if await workspaces.get(db, args.workspace) is None:
            return None
        return await key_store.create(db, args.workspace, name=args.name, sandbox=args.sandbox,
                                      permissions=permissions, rate_limit=args.rate_limit,
                                      email_rate_limit=args.email_rate_limit)
    result = run_store(config.load(), work)
    if result is None:
        print(f"no workspace {args.workspace}", file=sys.stderr)
        return 1
    key, doc = result
    if args.json:
        print(json.dumps({"key": key, "id": doc["_id"], "type": doc["type"]}))
    else:
        print(f"key {doc['_id']} ({doc['type']}): {key}\nShown once; store it now.")
    return 0


def cmd_key_list(args) -> int:
    keys = run_store(config.load(), lambda db: key_store.list_for(db, args.workspace))
    if args.json:
        print(json.dumps([{"id": k["_id"], "workspace_id": k["workspace_id"], "name": k["name"],
                           "type": k["type"], "prefix": k["prefix"], "permissions": k["permissions"],
                           "revoked": bool(k.get("revoked")), "created_at": k["created_at"]} for k in keys]))
        return 0
    for k in keys:
        state = "revoked" if k.get("revoked") else "active"
        print(f"{k['_id']}  {k['prefix']}…  {k['type']:7s} {state:8s} {k['name']}  ws={k['workspace_id']}")
    return 0


def cmd_key_revoke(args) -> int:
    doc = one_or_missing(config.load(), lambda db: key_store.revoke(db, args.key_id), f"no key {args.key_id}")
    if doc is None:
        return 1
    print(json.dumps({"id": doc["_id"], "revoked": True}) if args.json else f"key {args.key_id} revoked")
    return 0


def cmd_queues(args) -> int:
    from .queues import in_process, inspect  # local import: the broker stack, only for this command (see cmd_up)
    settings = config.load(start_store=False)
    if settings.amqp_url:
        rows = inspect(settings.amqp_url, args.management_port)
    else:
        found = in_process(config.load())
        if found is None:
            print("POSTROOM_AMQP_URL is not set, and no `postroom up` with an in-process broker is running on "
                  f"this store (data dir {settings.data_dir}).", file=sys.stderr)
            return 2
        rows = found
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'queue':20s} {'ready':>8s} {'unacked':>8s} {'consumers':>9s}  source")
    for r in rows:
        fmt = lambda v: "-" if v is None else str(v)  # noqa: E731
        counts = f"{fmt(r['ready']):>8s} {fmt(r['unacked']):>8s} {fmt(r['consumers']):>9s}"
        print(f"{r['queue']:20s} {counts}  {r['source']}")
    return 0


# Command modules of later features, each adding its commands with add_commands(subparsers).
EXTRA_COMMANDS = [inbound_cli.add_commands, settings_cli.add_commands, contacts_cli.add_commands,
                  status_cli.add_commands, store_cli.add_commands, operator_cli.add_commands]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="postroom", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser(
        "up", help="run everything on this machine (embedded defaults)",
        description="Runs the front, a worker and the scheduler in one process, on embedded defaults: the "
                    "embedded store, an in-process broker, mail captured to DATA_DIR/outbox.",
        epilog="The embedded store listens on a Unix socket in the data dir and on no TCP port, by design: "
               "it has no authentication (ops/embedded_store.py). `postroom store url` prints its URL for "
               "mongosh, Compass or PyMongo; set POSTROOM_MONGODB_URL to use a MongoDB of your own.")
    up.add_argument("--host", default="127.0.0.1", help="the address the front binds")
    up.add_argument("--port", type=int, default=8080,
                    help="the front's port (links in mail follow it unless POSTROOM_BASE_URL is set)")
    up.add_argument("--threads", type=int, default=8, help="worker threads")
    up.set_defaults(func=cmd_up)

    front = sub.add_parser("front", help="run the HTTP front")
    front.add_argument("--host", default="127.0.0.1", help="the address the front binds")
    front.add_argument("--port", type=int, default=8080, help="the front's port")
    front.set_defaults(func=cmd_front)

    worker = sub.add_parser("worker", help="run a worker pool for some queues (RabbitMQ)")
    worker.add_argument("--queues", help="comma-separated queue names (default: all)")
    worker.add_argument("-p", "--processes", type=int, default=2, help="worker processes")
    worker.add_argument("-t", "--threads", type=int, default=8, help="threads a process")
    worker.set_defaults(func=cmd_worker)

    sched = sub.add_parser("scheduler", help="promote due work from the store onto the broker")
    sched.set_defaults(func=cmd_scheduler)

    idx = sub.add_parser("indexes", help="create the store's indexes")
    idx.set_defaults(func=cmd_indexes)

    ws = sub.add_parser("workspace", help="workspaces").add_subparsers(dest="action", required=True)
    wc = ws.add_parser("create")
    wc.add_argument("name")
    wc.add_argument("--from-email", dest="from_email")
    wc.add_argument("--json", action="store_true")
    wc.set_defaults(func=cmd_workspace_create)
    wl = ws.add_parser("list")
    wl.add_argument("--json", action="store_true")
    wl.set_defaults(func=cmd_workspace_list)
    settings_cli.add_workspace_set(ws)

    key = sub.add_parser("key", help="API keys").add_subparsers(dest="action", required=True)
    kc = key.add_parser("create")
    kc.add_argument("--workspace", required=True)
    kc.add_argument("--name", default="default")
    kc.add_argument("--sandbox", action="store_true", help="a tm_test_ key: never sends real mail")
    kc.add_argument("--permissions", help="comma-separated, e.g. contacts:read,email:write; `console` lets "
                                          "the key sign in to the console (default *)")
    kc.add_argument("--rate-limit", dest="rate_limit", type=int,
                    help="API requests per minute (default: POSTROOM_RATE_LIMIT_PER_MINUTE)")
    kc.add_argument("--email-rate-limit", dest="email_rate_limit", type=int,
                    help="emails per minute: a send counts 1, a batch of N messages N "
                         "(default: POSTROOM_EMAIL_RATE_LIMIT_PER_MINUTE)")
    kc.add_argument("--json", action="store_true")
    kc.set_defaults(func=cmd_key_create)
    kl = key.add_parser("list")
    kl.add_argument("--workspace")
    kl.add_argument("--json", action="store_true")
    kl.set_defaults(func=cmd_key_list)
    kr = key.add_parser("revoke")
    kr.add_argument("key_id")
    kr.add_argument("--json", action="store_true")
    kr.set_defaults(func=cmd_key_revoke)

    queues = sub.add_parser("queues", help="ready/unacked counts per queue")
    queues.add_argument("--json", action="store_true")
    queues.add_argument("--management-port", type=int, default=15672)
    queues.set_defaults(func=cmd_queues)

    for add_commands in EXTRA_COMMANDS:
        add_commands(sub)
    return parser


class _DefaultsShown(argparse.ArgumentDefaultsHelpFormatter):
    """Shows an option's default where it has one (not None, not a flag's False)."""

    def _get_help_string(self, action):
        if action.default is None or action.default is False or action.default is argparse.SUPPRESS:
            return action.help
        return super()._get_help_string(action)


class _Parser(argparse.ArgumentParser):
    """Every command's --help shows each option's default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _DefaultsShown)
        super().__init__(*args, **kwargs)


def main(argv: list[str] | None = None) -> int:
    logs.configure(log_format=Settings.from_env().log_format)
    args = build_parser().parse_args(argv)
    return args.func(args) or 0


if __name__ == "__main__":
    sys.exit(main())
