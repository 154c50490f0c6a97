"""GET /api/v1/health: no key needed; reports store and broker reachability."""

import httpx
import pytest

from ops.embedded_store import free_port
from tests.support.polling import wait_until
from tests.support.services import MANAGEMENT_URL, another_front, create_vhost, delete_vhost

pytestmark = pytest.mark.e2e  # the real front's /health, and fronts of its own


def test_health_is_ok_when_store_and_broker_answer(service):
    response = httpx.get(service.api + "/health", timeout=30)
    assert response.status_code == 200
    assert response.json()["data"] == {"status": "ok", "store": "ok", "broker": "ok", "version": "v1"}
    assert "X-RateLimit-Limit" not in response.headers  # not a keyed request


def test_health_answers_503_degraded_naming_an_unreachable_broker(service):
    env = dict(service.env, POSTROOM_AMQP_URL=f"amqp://guest:guest@127.0.0.1:{free_port()}/%2F")
    with another_front("front-no-broker", env, service.log_dir, answers=(503,)) as base_url:
        response = httpx.get(base_url + "/api/v1/health", timeout=30)
    assert response.status_code == 503
    assert response.json()["data"] == {"status": "degraded", "store": "ok", "broker": "unreachable", "version": "v1"}


def _vhost_connections(vhost: str) -> list[str]:
    answer = httpx.get(f"{MANAGEMENT_URL}/api/vhosts/{vhost}/connections", auth=("guest", "guest"), timeout=30)
    answer.raise_for_status()
    return [connection["name"] for connection in answer.json()]


def test_health_stays_ok_after_the_broker_closed_its_connection(service):
    """The broker closes a connection it finds idle (pika answers heartbeats only when
    called, and a front's health check may be idle for minutes), on a restart, or when an
    operator closes it: the next check must connect anew, not report unreachable a broker
    that answers."""
    vhost, amqp_url = create_vhost()
    try:
        with another_front("front-closed-broker", dict(service.env, POSTROOM_AMQP_URL=amqp_url),
                           service.log_dir) as base_url:
            assert httpx.get(base_url + "/api/v1/health", timeout=30).json()["data"]["broker"] == "ok"
            # (the management API shows a connection a few seconds after it opens; closing it
            # sends the client its close at once, which the front reads at its next check)
            for name in wait_until(lambda: _vhost_connections(vhost), 60, "the front's connection shown", 0.25):
                httpx.delete(f"{MANAGEMENT_URL}/api/connections/{name}", auth=("guest", "guest"),
                             timeout=30).raise_for_status()
            answers = [httpx.get(base_url + "/api/v1/health", timeout=30) for _ in range(20)]
            assert [(a.status_code, a.json()["data"]["broker"]) for a in answers] == [(200, "ok")] * 20
    finally:
        delete_vhost(vhost)
