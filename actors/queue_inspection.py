"""Queue inspection: ready/unacked counts per queue, from RabbitMQ's management API when
it answers, otherwise from passive declares (which know only the ready count); and the
counts a `postroom up`'s in-process broker carries in its worker's heartbeat
(actors/heartbeat.py). Read by `postroom queues` / `postroom status` (ops/queues.py) and
by the console's operator view. Blocking (httpx, pika): the front calls it off its loop."""

from __future__ import annotations

from urllib.parse import quote, unquote, urlsplit

import httpx
import pika

from .broker import QUEUES
from .heartbeat import IN_PROCESS_QUEUES_FIELD, IN_PROCESS_QUEUES_SECONDS

IN_PROCESS_SOURCE = "in-process broker"
# Counts older than a few missed beats are of an `up` that stopped: not shown as current.
IN_PROCESS_FRESH_SECONDS = 5 * IN_PROCESS_QUEUES_SECONDS


def _names() -> list[str]:
    names = []
    for q in QUEUES:
        names += [q, f"{q}.DQ", f"{q}.XQ"]
    return names


def inspect(amqp_url: str, management_port: int = 15672) -> list[dict]:
    parts = urlsplit(amqp_url)
    # the URL's path is the percent-encoded vhost (`/%2F` is "/"); the management API takes it encoded once
    vhost = unquote((parts.path or "/")[1:]) or "/"
    user, password = parts.username or "guest", parts.password or "guest"
    try:
        response = httpx.get(f"http://{parts.hostname}:{management_port}/api/queues/{quote(vhost, safe='')}",
                             auth=(user, password), timeout=2.0)
        if response.status_code == 200:
            by_name = {q["name"]: q for q in response.json()}
            return [{"queue": n, "ready": by_name.get(n, {}).get("messages_ready", 0),
                     "unacked": by_name.get(n, {}).get("messages_unacknowledged", 0),
                     "consumers": by_name.get(n, {}).get("consumers", 0), "source": "management"}
                    for n in _names()]
    except httpx.HTTPError:
        pass
    rows = []
    connection = pika.BlockingConnection(pika.URLParameters(amqp_url))
    try:
        for name in _names():
            channel = connection.channel()
            try:
                ok = channel.queue_declare(queue=name, passive=True)
                rows.append({"queue": name, "ready": ok.method.message_count, "unacked": None,
                             "consumers": ok.method.consumer_count, "source": "passive-declare"})
                channel.close()
            except pika.exceptions.ChannelClosedByBroker:
                rows.append({"queue": name, "ready": None, "unacked": None, "consumers": None,
                             "source": "not declared yet"})
    finally:
        connection.close()
    return rows


def in_process_rows(beats: list[dict]) -> list[dict] | None:
    """The queues as the newest heartbeat carrying in-process broker counts (`beats`,
    newest first) last counted them; None when none carries them."""
    beat = next((p for p in beats if p.get(IN_PROCESS_QUEUES_FIELD)), None)
    if beat is None:
        return None
    counted = {row["queue"]: row for row in beat[IN_PROCESS_QUEUES_FIELD]}
    consumed = set(beat.get("queues") or [])
    return [{"queue": n, "ready": counted.get(n, {}).get("ready", 0), "unacked": counted.get(n, {}).get("unacked", 0),
             "consumers": int(not n.endswith(".XQ") and n.removesuffix(".DQ") in consumed),
             "source": IN_PROCESS_SOURCE} for n in _names()]


NO_BROKER = "no RabbitMQ (POSTROOM_AMQP_URL unset) and no `postroom up` with its in-process broker running"


def counts_or_note(amqp_url: str | None, fresh_beats: list[dict]) -> tuple[list[dict], str]:
    """The work queues' rows (dead-letter `.XQ` queues left out) and, when there are none
    to show, why: RabbitMQ's when it is configured, else the in-process broker's from the
    heartbeats seen lately (`fresh_beats`, newest first)."""
    if not amqp_url:
        rows = in_process_rows(fresh_beats)
        if rows is None:
            return [], NO_BROKER
        return [r for r in rows if not r["queue"].endswith(".XQ")], ""
    try:
        return [r for r in inspect(amqp_url) if not r["queue"].endswith(".XQ")], ""
    except Exception as error:  # noqa: BLE001 - the rest of the screen is still worth showing
        return [], f"RabbitMQ did not answer: {error}"
