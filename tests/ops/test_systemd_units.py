"""The systemd units in ops/systemd run commands the `postroom` CLI accepts, restart what
dies, and give a stopping worker pool time to finish its jobs."""

from __future__ import annotations

import re
from pathlib import Path

from actors.broker import QUEUES
from ops.cli import build_parser
from ops.worker_pool import STOP_GRACE_SECONDS

UNITS = Path(__file__).resolve().parents[2] / "ops" / "systemd"


def settings_of(path: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[")):
            name, value = line.split("=", 1)
            found.setdefault(name.strip(), []).append(value.strip())
    return found


def worker_queues_started_by_the_target() -> list[str]:
    wants = " ".join(settings_of(UNITS / "postroom.target")["Wants"]).split()
    return [re.fullmatch(r"postroom-worker@(\w+)\.service", w).group(1)
            for w in wants if w.startswith("postroom-worker@")]


def test_every_service_runs_a_postroom_command_the_cli_accepts_and_restarts_always():
    services = sorted(UNITS.glob("*.service"))
    assert {p.name for p in services} == {"postroom-front.service", "postroom-worker@.service",
                                          "postroom-scheduler.service", "postroom-inbound.service"}
    for path in services:
        unit = settings_of(path)
        assert unit["Restart"] == ["always"], path.name
        assert "/etc/postroom/postroom.env" in unit["EnvironmentFile"], path.name
        defaults = dict(pair.split("=") for line in unit.get("Environment", []) for pair in line.split())
        for queue in worker_queues_started_by_the_target() if "%i" in unit["ExecStart"][0] else [None]:
            command = unit["ExecStart"][0].replace("%i", queue or "")
            command = re.sub(r"\$\{(\w+)\}", lambda m, defaults=defaults: defaults[m.group(1)], command)
            executable, *args = command.split()
            assert executable.endswith("/postroom"), path.name
            parsed = build_parser().parse_args(args)
            assert path.name.startswith(f"postroom-{parsed.command}"), (path.name, args)


def test_the_target_starts_a_worker_pool_for_every_queue_with_actors():
    assert set(worker_queues_started_by_the_target()) == set(QUEUES)


def test_a_stopping_worker_pool_is_signalled_alone_and_given_its_grace_period():
    unit = settings_of(UNITS / "postroom-worker@.service")
    assert unit["KillMode"] == ["mixed"]  # SIGTERM to the pool, which stops its children in order
    assert int(unit["TimeoutStopSec"][0]) > STOP_GRACE_SECONDS
