"""/openapi.yaml: an OpenAPI 3 description generated from the validating models, complete
for every registered route."""

import json
import subprocess
import sys

import httpx
import pytest
import yaml
from openapi_spec_validator import validate as validate_openapi

# The platform's own operations; features add many more (all checked against the app below).
PLATFORM_OPERATIONS = {
    ("get", "/api/v1/health"),
    ("get", "/api/v1/api-key/permissions"),
    ("post", "/api/v1/email/send"),
    ("get", "/api/v1/email/{message_id}/status"),
    ("delete", "/api/v1/email/{message_id}"),
}

pytestmark = pytest.mark.e2e  # the real front's documents, and the app's routes listed in processes of their own

# Lists the app's routes in a process of its own, so this test process keeps no broker.
_ROUTES_SCRIPT = """
import json, re
from pipelines.core.settings import Settings
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
    return {tuple(row) for row in _run_in_app_process(service, _ROUTES_SCRIPT)}


# What each view's code answers on success: the status literals of its `one(...)` calls
# (following `return await helper(...)` into helpers of the same module), 200 for `page(...)`.
_STATUSES_SCRIPT = """
import ast, inspect, json, re, textwrap
from pipelines.core.settings import Settings
from front.app import create_app
app = create_app(Settings(mongodb_url="mongodb://127.0.0.1:1", secret_key="routes"))

def statuses(func, seen):
    func = inspect.unwrap(func)
    if func in seen:
        return set()
    seen.add(func)
    found = set()
    for node in ast.walk(ast.parse(textwrap.dedent(inspect.getsource(func)))):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
            continue
        name = node.func.id
        if name in ("one", "streamed"):
            at = 1 if name == "one" else 3  # one(body, status); streamed(chunks, type, filename, status)
            status = node.args[at] if len(node.args) > at else ast.Constant(200)
            # `one(body, 200 if suppressed else 202)`: both branches are answers
            choices = [status.body, status.orelse] if isinstance(status, ast.IfExp) else [status]
            for choice in choices:
                assert isinstance(choice, ast.Constant), ("status not a literal", func.__name__, ast.dump(choice))
                found.add(choice.value)
        elif name in ("page", "paged"):
            found.add(200)
        else:  # a helper of the front's own (a route module's, or lookup's, audience's) answers for the view
            helper = func.__globals__.get(name)
            if inspect.isfunction(helper) and helper.__module__.startswith("front."):
                found |= statuses(helper, seen)
    return found

rows = []
for rule in app.url_map.iter_rules():
    if rule.rule.startswith("/api/v1/") and rule.endpoint != "health.health":
        path = re.sub(r"<(?:[a-z]+:)?([a-z_]+)>", r"{\\1}", rule.rule)
        for method in sorted(rule.methods - {"HEAD", "OPTIONS"}):
            rows.append([method.lower(), path, sorted(statuses(app.view_functions[rule.endpoint], set()))])
print(json.dumps(rows))
"""

# The spec (§7): these accept the Idempotency-Key header; the campaign send requires it.
IDEMPOTENT_OPERATIONS = {
    ("post", "/api/v1/email/send"): False,
    ("post", "/api/v1/email/batch"): False,
    ("post", "/api/v1/campaigns"): False,
    ("post", "/api/v1/campaigns/{campaign_id}/send/api"): True,
}
AUTHENTICATED_ERRORS = {"401", "403", "404", "429", "500", "503"}
ERROR_REF = {"$ref": "#/components/schemas/Error"}


def _run_in_app_process(service, script: str):
    out = subprocess.run([sys.executable, "-c", script], env=service.env, capture_output=True,
                         text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def api_operations(document):
    for path, ops in document["paths"].items():
        if path.startswith("/api/v1/"):
            for method, op in ops.items():
                yield method, path, op


def success_codes(op) -> set[str]:
    return {code for code in op["responses"] if code.startswith("2")}


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
    assert any(v.get("format") == "email" and v.get("maxLength") == 254 and "pattern" in v  # no .test etc.
               for v in to_variants)
    assert any(v.get("type") == "array" and v.get("maxItems") == 50 for v in to_variants)
    assert properties["track_opens"]["type"] == "boolean"


def test_list_endpoints_document_limit_and_offset(document):
    params = {p["name"]: p for p in document["paths"]["/api/v1/tags"]["get"]["parameters"]}
    assert params["limit"]["in"] == "query"
    assert params["limit"]["schema"] == {"default": 100, "maximum": 1000, "minimum": 1,
                                         "title": "Limit", "type": "integer"}
    assert params["offset"]["schema"]["minimum"] == 0
    assert params["offset"]["schema"]["default"] == 0


def test_the_document_validates_as_openapi_3_1(document):
    assert document["openapi"] == "3.1.0"
    validate_openapi(document)


def answer_model(schema: dict) -> str:
    """The component named by a success envelope, `{data: Model}` or `{data: [Model], pagination}`."""
    data = schema["properties"]["data"]
    ref = data["items"]["$ref"] if "pagination" in schema["properties"] else data["$ref"]
    return ref.rsplit("/", 1)[-1]


def test_every_api_operation_answers_a_typed_model_in_the_data_or_page_envelope(document):
    schemas = document["components"]["schemas"]
    for method, path, op in api_operations(document):
        codes = success_codes(op)
        assert codes, (method, path)
        for code in codes:
            content = op["responses"][code]["content"]
            if "application/json" not in content:  # a file download (the contacts export, a raw message)
                [file_type] = content
                assert file_type in ("text/csv", "message/rfc822") and content[file_type]["schema"]["type"] == "string"
                continue
            schema = content["application/json"]["schema"]
            assert schema["type"] == "object" and "data" in schema["required"], (method, path, code)
            if "pagination" in schema["properties"]:
                assert schema["required"] == ["data", "pagination"]
                assert schema["properties"]["data"]["type"] == "array"
                assert schema["properties"]["pagination"] == {"$ref": "#/components/schemas/Pagination"}
            model = schemas[answer_model(schema)]
            assert model["type"] == "object" and model["properties"] and model["required"], (method, path, model)
    assert set(schemas["Pagination"]["required"]) == {"total", "limit", "offset", "has_more"}
    assert "Data" not in schemas and "Page" not in schemas, "no untyped envelopes left"


def test_answer_models_say_what_each_field_is(document):
    schemas = document["components"]["schemas"]
    contacts = document["paths"]["/api/v1/contacts/{contact_id}"]["get"]["responses"]["200"]
    contact = schemas[answer_model(contacts["content"]["application/json"]["schema"])]
    assert set(contact["required"]) >= {"id", "email", "subscribed", "attributes", "tags", "lists", "created_at"}
    assert contact["properties"]["subscribed"]["type"] == "boolean"
    assert contact["properties"]["created_at"] == {"format": "date-time", "title": "Created At", "type": "string"}
    assert {"format": "date-time", "type": "string"} in contact["properties"]["unsubscribed_at"]["anyOf"]
    send = document["paths"]["/api/v1/email/send"]["post"]["responses"]
    assert {answer_model(send[c]["content"]["application/json"]["schema"]) for c in ("200", "201", "202")} \
        == {"EmailAccepted", "EmailScheduled"}
    assert answer_model(send["201"]["content"]["application/json"]["schema"]) == "EmailScheduled"


def test_delete_trigger_requires_its_id(document):
    [parameter] = document["paths"]["/api/v1/webhooks/triggers"]["delete"]["parameters"]
    assert parameter["name"] == "id" and parameter["in"] == "query" and parameter["required"] is True
    listed = {p["name"]: p for p in document["paths"]["/api/v1/webhooks/triggers"]["get"]["parameters"]}
    assert not listed["limit"].get("required") and not listed["event"].get("required")


def test_list_endpoints_and_only_they_document_the_paginated_shape(document):
    for method, path, op in api_operations(document):
        pages = {c for c in success_codes(op)
                 if "pagination" in op["responses"][c]["content"].get("application/json", {})
                 .get("schema", {}).get("properties", {})}
        takes_limit = any(p["name"] == "limit" and p["in"] == "query" for p in op["parameters"])
        assert bool(pages) == takes_limit, (method, path)
    schema = document["paths"]["/api/v1/contacts"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert schema["properties"]["data"] == {"type": "array", "items": {"$ref": "#/components/schemas/Contact"}}


def test_documented_success_statuses_are_the_ones_each_view_answers(service, document):
    for method, path, answered in _run_in_app_process(service, _STATUSES_SCRIPT):
        documented = sorted(int(c) for c in success_codes(document["paths"][path][method]))
        assert documented == answered, (method, path, "documented", documented, "code answers", answered)


def test_creating_posts_document_201_and_asynchronous_sends_202(document):
    paths = document["paths"]
    assert success_codes(paths["/api/v1/contacts"]["post"]) == {"201"}
    assert success_codes(paths["/api/v1/campaigns"]["post"]) == {"201"}
    assert success_codes(paths["/api/v1/email/batch"]["post"]) == {"202"}
    assert success_codes(paths["/api/v1/campaigns/{campaign_id}/send/api"]["post"]) == {"202"}
    assert {"201", "202"} <= success_codes(paths["/api/v1/email/send"]["post"])


def test_authenticated_operations_document_each_error_status_as_the_envelope(document):
    for method, path, op in api_operations(document):
        responses = op["responses"]
        errors = {code for code in responses if code[0] in "45"}
        if path == "/api/v1/health":
            assert errors == {"500", "503"}
            assert answer_model(responses["503"]["content"]["application/json"]["schema"]) == "Health"
            assert responses["503"]["headers"]["Retry-After"] == {"$ref": "#/components/headers/Retry-After"}
            continue
        assert AUTHENTICATED_ERRORS <= errors, (method, path)
        assert "headers" not in responses["401"], (method, path)  # refused before any window counts
        if op["parameters"] or "requestBody" in op:
            assert "400" in errors, (method, path)
        if method != "get":
            assert "409" in errors, (method, path)
        for code in errors | {"default"}:
            assert responses[code]["content"]["application/json"]["schema"] == ERROR_REF, (method, path, code)
        assert responses["429"]["headers"]["Retry-After"] == {"$ref": "#/components/headers/Retry-After"}
        assert responses["503"]["headers"]["Retry-After"] == {"$ref": "#/components/headers/Retry-After"}


def test_authenticated_operations_document_the_rate_limit_headers(document):
    headers = document["components"]["headers"]
    assert headers["X-RateLimit-Reset"]["schema"] == {"type": "string", "format": "date-time"}
    assert headers["X-RateLimit-Limit"]["schema"] == {"type": "integer"}
    for method, path, op in api_operations(document):
        for code in success_codes(op):
            documented = set(op["responses"][code].get("headers", {}))
            expected = set() if path == "/api/v1/health" else \
                {"X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"}
            assert expected <= documented, (method, path, code)


def test_idempotent_operations_and_only_they_declare_the_idempotency_key_header(document):
    declared = {}
    for method, path, op in api_operations(document):
        for parameter in op["parameters"]:
            if parameter["name"] == "Idempotency-Key":
                assert parameter["in"] == "header"
                assert parameter["schema"]["maxLength"] == 255
                declared[(method, path)] = parameter["required"]
                for code in success_codes(op):
                    assert "X-Idempotency-Status" in op["responses"][code]["headers"], (method, path)
    assert declared == IDEMPOTENT_OPERATIONS
    status = document["components"]["headers"]["X-Idempotency-Status"]["schema"]
    assert status == {"type": "string", "enum": ["new", "cached"]}


def test_operation_ids_are_unique(document):
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))


def test_a_live_list_and_create_answer_as_documented(tenant, document):
    created = tenant.post("/tags", json={"name": "documented"})
    assert str(created.status_code) in success_codes(document["paths"]["/api/v1/tags"]["post"])
    assert set(created.json()) == {"data"}
    listed = tenant.get("/tags")
    assert set(listed.json()) == {"data", "pagination"}
    for header in ("X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"):
        assert header in listed.headers


def test_every_operation_has_a_short_summary_and_a_tag_a_client_groups_it_by(document):
    """A generated client names its methods by the summaries and puts each tag in a module
    of its own (issue #37: 30 of 110 operations had a summary, none a tag)."""
    declared = {tag["name"] for tag in document["tags"]}
    for path, methods in document["paths"].items():
        for method, op in methods.items():
            where = f"{method.upper()} {path}"
            assert op.get("summary") and len(op["summary"]) <= 60, f"{where}: add it to front/openapi_summaries.py"
            assert len(op["tags"]) == 1 and op["tags"][0] in declared, where
    assert {"email", "contacts", "campaigns", "webhooks", "pages"} <= declared
    assert all(tag.get("description") for tag in document["tags"])
    assert document["servers"] == [{"url": "/", "description": "this server"}]


def test_a_docstring_cut_into_summary_and_description_is_whole_in_the_description(document):
    health = document["paths"]["/api/v1/health"]["get"]
    assert health["summary"] == "Check health"
    assert health["description"].startswith("API health check; needs no key.")
