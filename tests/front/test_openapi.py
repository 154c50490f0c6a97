"""/openapi.yaml: an OpenAPI 3 description generated from the validating models, complete
for every registered route."""

import json
import subprocess
import sys

import httpx
import pytest
import yaml

# The platform's own operations; features add many more (all checked against the app below).
PLATFORM_OPERATIONS = {
    ("get", "/api/v1/health"),
    ("get", "/api/v1/api-key/permissions"),
    ("post", "/api/v1/email/send"),
    ("get", "/api/v1/email/{message_id}/status"),
    ("delete", "/api/v1/email/{message_id}"),
}

# Lists the app's routes in a process of its own, so this test process keeps no broker.
_ROUTES_SCRIPT = """
import json, re
from pipelines.settings import Settings
from front.app import create_app
app = create_app(Settings(mongodb_url="mongodb://127.0.0.1:1", secret_key="routes"))
rows = []
for rule in app.url_map.iter_rules():
    for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
        rows.append([method.lower(), re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\\1}", rule.rule)])
print(json.dumps(rows))
"""


@pytest.fixture(scope="module")
def document(service):
    response = httpx.get(service.base_url + "/openapi.yaml", timeout=30)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/yaml")
    return yaml.safe_load(response.text)


@pytest.fixture(scope="module")
def registered_operations(service):
    out = subprocess.run([sys.executable, "-c", _ROUTES_SCRIPT], env=service.env, capture_output=True,
                         text=True, timeout=120, check=True)
    return {tuple(row) for row in json.loads(out.stdout.strip().splitlines()[-1])}


def operations(document) -> set[tuple[str, str]]:
    return {(method, path) for path, ops in document["paths"].items() for method in ops}


def test_openapi_yaml_is_openapi_3_and_needs_no_key(document):
    assert str(document["openapi"]).startswith("3.")
    assert document["info"]["title"] == "Postroom API"
    assert document["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert document["security"] == [{"bearer": []}]


def test_yaml_and_json_publish_the_same_document(service, document):
    as_json = httpx.get(service.base_url + "/openapi.json", timeout=30).json()
    assert as_json == document


def test_platform_operations_are_documented(document):
    assert PLATFORM_OPERATIONS <= operations(document)


def test_every_registered_api_route_is_documented(document, registered_operations):
    api = {(m, p) for m, p in registered_operations if p.startswith("/api/v1/")}
    assert PLATFORM_OPERATIONS <= api
    missing = api - operations(document)
    assert not missing, f"routes missing from /openapi.yaml: {sorted(missing)}"


def test_every_api_operation_documents_the_error_envelope(document):
    error = document["components"]["schemas"]["Error"]
    assert error["required"] == ["error"]
    assert error["properties"]["error"]["required"] == ["code", "message"]
    for path, ops in document["paths"].items():
        for method, op in ops.items():
            assert op["responses"], (method, path)
            if path.startswith("/api/v1/"):
                schema = op["responses"]["default"]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Error"}, (method, path)


def test_only_health_and_pages_outside_the_api_answer_without_a_key(document):
    public = {(m, p) for p, ops in document["paths"].items() for m, op in ops.items() if op.get("security") == []}
    assert ("get", "/api/v1/health") in public
    assert {p for _, p in public if p.startswith("/api/v1/")} == {"/api/v1/health"}


def test_send_request_body_is_described_by_the_validating_model(document):
    body = document["paths"]["/api/v1/email/send"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    if "$ref" in body:
        body = document["components"]["schemas"][body["$ref"].rsplit("/", 1)[-1]]
    assert body["additionalProperties"] is False
    assert set(body["required"]) == {"to", "subject"}
    properties = body["properties"]
    assert {"to", "subject", "html", "text", "template_id", "template_data", "from_email", "from_name",
            "reply_to", "track_opens", "track_clicks", "send_at"} <= set(properties)
    assert properties["subject"]["maxLength"] == 998
    to_variants = properties["to"]["anyOf"]
    assert {"format": "email", "maxLength": 254, "type": "string"} in to_variants
    assert any(v.get("type") == "array" and v.get("maxItems") == 50 for v in to_variants)
    assert properties["track_opens"]["type"] == "boolean"


def test_list_endpoints_document_limit_and_offset(document):
    params = {p["name"]: p for p in document["paths"]["/api/v1/tags"]["get"]["parameters"]}
    assert params["limit"]["in"] == "query"
    assert params["limit"]["schema"] == {"default": 100, "maximum": 1000, "minimum": 1,
                                         "title": "Limit", "type": "integer"}
    assert params["offset"]["schema"]["minimum"] == 0
    assert params["offset"]["schema"]["default"] == 0
