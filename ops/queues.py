"""Queue inspection: ready/unacked counts per queue, from RabbitMQ's management API when
it answers, otherwise from passive declares (which know only the ready count)."""

from __future__ import annotations

from urllib.parse import quote, urlsplit

import httpx
import pika

from actors.broker import QUEUES


def _names() -> list[str]:
    names = []
    for q in QUEUES:
        names += [q, f"{q}.DQ", f"{q}.XQ"]
    return names


def inspect(amqp_url: str, management_port: int = 15672) -> list[dict]:
    parts = urlsplit(amqp_url)
    vhost = (parts.path or "/")[1:] or "/"
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
