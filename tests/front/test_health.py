"""GET /api/v1/health: no key needed; reports store and broker reachability."""

import httpx
import pytest

from ops.embedded_store import free_port
from tests.support.services import another_front

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
