"""Generated requests (schemathesis, from the live /openapi.yaml) against a handful of
endpoints: nothing answers 5xx, and every failure uses the error envelope."""

import json

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode

VALID, INVALID = GenerationMode.POSITIVE, GenerationMode.NEGATIVE
# (method, path, modes): operations without inputs have no invalid requests to generate.
OPERATIONS = [
    ("POST", "/api/v1/email/send", (VALID, INVALID)),
    ("GET", "/api/v1/email/{message_id}/status", (VALID, INVALID)),
    ("DELETE", "/api/v1/email/{message_id}", (VALID, INVALID)),
    ("GET", "/api/v1/tags", (VALID, INVALID)),
    ("POST", "/api/v1/tags", (VALID, INVALID)),
    ("GET", "/api/v1/contacts", (VALID, INVALID)),
    ("GET", "/api/v1/api-key/permissions", (VALID,)),
    ("POST", "/api/v1/automations", (VALID, INVALID)),
    ("GET", "/api/v1/automations", (VALID, INVALID)),
    ("GET", "/api/v1/health", (VALID,)),
]
CASES = [(method, path, mode) for method, path, modes in OPERATIONS for mode in modes]
EXAMPLES_PER_MODE = 12


@pytest.fixture(scope="module")
def schema(service):
    return schemathesis.openapi.from_url(service.base_url + "/openapi.yaml", timeout=30)


def assert_envelope_on_failure(response, label):
    assert response.status_code < 500, (label, response.status_code, response.content[:500])
    if response.status_code < 400:
        return
    body = json.loads(response.content)
    assert set(body) == {"error"}, (label, body)
    error = body["error"]
    assert isinstance(error.get("code"), str) and error["code"], (label, body)
    assert isinstance(error.get("message"), str) and error["message"], (label, body)
    assert set(error) <= {"code", "message", "path"}, (label, body)


@pytest.mark.parametrize("method, path, mode", CASES, ids=[f"{m} {p} {mode.value}" for m, p, mode in CASES])
def test_generated_requests_never_fail_with_5xx_and_errors_use_the_envelope(service, schema, method, path, mode):
    # A sandbox key: generated sends go through validation, store and broker but never to SMTP.
    tenant = service.tenant(sandbox=True)
    auth = {"Authorization": f"Bearer {tenant.key}"}
    operation = schema[path][method]

    @settings(max_examples=EXAMPLES_PER_MODE, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(generation_mode=mode))
    def exercise(case):
        response = case.call(base_url=service.base_url, headers=auth, timeout=30)
        assert_envelope_on_failure(response, case.as_curl_command(headers=auth))

    exercise()
