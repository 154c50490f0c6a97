"""Generated requests (schemathesis, from the live /openapi.yaml): nothing answers 5xx,
answers match the documented statuses and shapes, every failure uses the error envelope,
list endpoints accept every request their schema allows, and stateful runs follow the
document's OpenAPI links from a created resource to the operations on it, on a front and
database of their own, with no finding at all (issue #31.6). Each run is bounded by example
counts (the stateful one derandomized too)."""

import collections
import datetime
import json

import httpx
import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Flaky
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import positive_data_acceptance, response_schema_conformance

from tests.support.private_stack import private_stack

pytestmark = pytest.mark.e2e  # schemathesis against the real front, and a stack of its own

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
    ("POST", "/api/v1/inbound/routes", (VALID, INVALID)),
    ("GET", "/api/v1/inbound/messages", (VALID, INVALID)),
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


# List endpoints, whose inputs are query parameters only: every request the schema allows
# must be accepted (a refused one is contract drift, as `since=` and `limit=1.0` were).
# /bounces and /inbound/messages are left out: `until` must be later than `since`, which a
# schema cannot say.
LISTS = ["/api/v1/contacts", "/api/v1/contacts/activity", "/api/v1/contacts/duplicates", "/api/v1/tags",
         "/api/v1/lists", "/api/v1/segments", "/api/v1/templates", "/api/v1/campaigns", "/api/v1/webhooks/triggers",
         "/api/v1/conversions", "/api/v1/domains", "/api/v1/suppressions", "/api/v1/analytics",
         "/api/v1/inbound/routes", "/api/v1/inbound/domains"]


@pytest.mark.parametrize("path", LISTS)
def test_list_endpoints_accept_every_request_their_schema_allows(service, schema, path):
    tenant = service.tenant(sandbox=True)
    auth = {"Authorization": f"Bearer {tenant.key}"}

    @settings(max_examples=EXAMPLES_PER_MODE, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=schema[path]["GET"].as_strategy(generation_mode=VALID))
    def exercise(case):
        response = case.call(base_url=service.base_url, headers=auth, timeout=30)
        case.validate_response(response, checks=[not_a_server_error, positive_data_acceptance,
                                                 response_schema_conformance], headers=auth)

    exercise()


# The stateful run: scenarios of up to STEPS calls, each next call drawn from the links of
# the previous answer (or a fresh operation), SCENARIOS of them, derandomized (the same
# draws every run, so a pass is not luck). Every schemathesis check runs (none excluded),
# with the scenario's recorder, so the stateful ones see the whole chain: ST202 (a
# schema-valid request refused), ST302 (a resource just created answering 404), ST301
# (served after its DELETE), and the rest. About 190 calls, 16 s of CPU (this process
# 12 s, the front 4 s, measured).
STEPS, SCENARIOS = 8, 100
# The test operation would POST to whatever host a generated URL names (the public internet).
OFFLINE = dict(method="POST", path_regex=r"/webhooks/\{webhook_id\}/test$")
CONFIG = {
    # The run's key goes in every request (get_call_kwargs), so schemathesis must not draw
    # the Authorization header: a negative case "missing" it was sent with the key, and a
    # harmless extra query parameter then read as invalid data accepted (ST201).
    "generation": {"with-security-parameters": False},
    # Links are the document's own (POST answers' `links`). Schemathesis' dependency analysis
    # guessed more, one of them wrong: DELETE /automations/{id}/steps/{step_id} with the
    # automation's id as step_id, whose 404 then read as "created resource gone" (ST302).
    "phases": {"stateful": {"inference": {"algorithms": ["location-headers"]}}},
    # Rules no schema can say, where a schema-valid request may rightly answer 400 (README,
    # "OpenAPI document"): `until` must be later than `since` (validation_error at `until`).
    "operations": [{"include-method": "GET", "include-path": "/api/v1/bounces", "checks": {"positive_data_acceptance": {
        "expected-statuses": ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]}}},
        # The spec's DELETE /tags/:id/contacts and /lists/:id/members take the contact ids to
        # take off in their body: the tag or list lives on, and so does its page of contacts.
        # ST301 reads any 2xx DELETE as "this path is gone"; it stays on for GET /tags/{id}
        # and /lists/{id}, which their DELETEs do remove.
        # PATCH /lists/:id with `conditions` is refused for a static list: the list's type is
        # state (fixed at creation), not something the request's schema can say. And a rule
        # naming a list or tag the workspace does not have answers 404 at the rule's value
        # (docs/api-conventions.md, "Ids"), which ST302 reads as the patched list gone; GET /lists/{id}
        # keeps that check.
        {"include-method": "PATCH", "include-path": "/api/v1/lists/{list_id}", "checks": {
            "positive_data_acceptance": {
                "expected-statuses": ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]},
            "ensure_resource_availability": {"enabled": False}}},
        *({"include-method": "GET", "include-path": path, "checks": {"use_after_free": {"enabled": False}}}
          for path in ("/api/v1/tags/{tag_id}/contacts", "/api/v1/lists/{list_id}/members"))],
}
SCHEDULED = [("POST", "/api/v1/email/send", datetime.timedelta(hours=1)),
             ("POST", "/api/v1/campaigns/{campaign_id}/schedule", datetime.timedelta(days=1))]


def teach_schedules(api) -> None:
    """`send_at` must lie in the future, within a horizon (a rule no schema can say): a
    generated date-time is moved there, so scheduled sends are exercised rather than
    refused as invalid_schedule; anything else generated there (a wrong type in a
    negative case) is left as it is."""
    def moving(ahead: datetime.timedelta, path: str):
        def map_body(ctx, body):
            if path == "/api/v1/email/send":  # one map_body an operation: the send rules' too
                body = sendable_body(body)
            if isinstance(body, dict) and isinstance(body.get("send_at"), str):
                try:
                    datetime.datetime.fromisoformat(body["send_at"])
                except ValueError:
                    return body
                return {**body, "send_at": (datetime.datetime.now(datetime.UTC) + ahead).isoformat()}
            return body
        return map_body

    for method, path, ahead in SCHEDULED:
        api.hooks.hook("map_body").apply_to(method=method, path=path)(moving(ahead, path))


TEMPLATE_BODIES = [("POST", "/api/v1/templates"), ("PATCH", "/api/v1/templates/{template_id}"),
                   ("POST", "/api/v1/templates/render")]
# A block's required content field in merge-tag syntax (pipelines/templates/email_blocks.py):
# a grammar the document does not carry, so random text is refused at its path.
GRAMMAR_FIELDS = {"dynamic": ("source", "products"), "conditional": ("condition", "plan == 'pro'")}


def with_block_grammar(body):
    """`body` with every generated `dynamic` or `conditional` block given a valid `source`
    or `condition` (merge-tag syntax, a rule no schema here says), at every depth; nothing
    else changes."""
    def fill(value):
        if isinstance(value, dict):
            grammar = GRAMMAR_FIELDS.get(value.get("type"))
            if grammar and isinstance(value.get("content"), dict):
                value = {**value, "content": {**value["content"], grammar[0]: grammar[1]}}
            return {key: fill(item) for key, item in value.items()}
        if isinstance(value, list):
            return [fill(item) for item in value]
        return value

    if isinstance(body, dict) and isinstance(body.get("json_structure"), dict):
        return {**body, "json_structure": fill(body["json_structure"])}
    return body


def teach_block_grammar(api) -> None:
    """Templates holding `dynamic` or `conditional` blocks are exercised rather than
    refused (with_block_grammar on their generated bodies)."""
    def map_body(ctx, body):
        return with_block_grammar(body)

    for method, path in TEMPLATE_BODIES:
        api.hooks.hook("map_body").apply_to(method=method, path=path)(map_body)


def _sendable(email: dict) -> dict:
    """One generated email made to pass the rules no schema can say (pipelines/messages/
    attachments.py, custom_headers.py, audience/recipients.py): a file's bytes must agree
    with its name and type and be no program (each becomes a small text file, inline
    ones with a content_id of their own), header names are unique without regard to case, and
    to + cc + bcc name at most 50 addresses."""
    out = dict(email)
    if isinstance(out.get("attachments"), list):
        out["attachments"] = [
            {**({"content_id": f"part{i}"} if isinstance(item, dict) and item.get("content_id") else {}),
             "filename": f"file-{i}.txt", "content": "aGVsbG8gd29ybGQ=", "content_type": "text/plain"}
            for i, item in enumerate(out["attachments"])]
    if isinstance(out.get("headers"), dict):
        out["headers"] = {name: value for name, value in
                          {name.lower(): (name, value) for name, value in out["headers"].items()}.values()}
    room = 50 - (len(out["to"]) if isinstance(out.get("to"), list) else 1)
    for field in ("cc", "bcc"):
        if isinstance(out.get(field), list):
            out[field] = out[field][:max(room, 0)]
            room -= len(out[field])
        elif isinstance(out.get(field), str):
            room -= 1
    return out


def sendable_body(body):
    """A send body (or a batch's) with each email made `_sendable`."""
    if not isinstance(body, dict):
        return body
    if isinstance(body.get("messages"), list):
        return {**body, "messages": [_sendable(m) if isinstance(m, dict) else m for m in body["messages"]]}
    return _sendable(body)


def teach_sending_rules(api) -> None:
    """POST /email/batch's bodies made sendable (POST /email/send's: in teach_schedules'
    hook, as schemathesis runs one map_body an operation)."""
    api.hooks.hook("map_body").apply_to(method="POST", path="/api/v1/email/batch")(
        lambda ctx, body: sendable_body(body))


def findings_of(failure: BaseException) -> list[str]:
    """The schemathesis codes (ST202, ST302, …) a failed validation carries."""
    nested = getattr(failure, "exceptions", None) or [failure]
    return [getattr(item, "code", type(item).__name__) for item in nested]


def report(problems: list) -> str:
    """How many of each finding, and one example of each (code, operation): the report a
    schemathesis CLI run would print, short enough to read in a failed assertion."""
    counts = collections.Counter(code for codes, *_ in problems for code in codes)
    examples = {}
    for codes, curl, status, body, text in problems:
        examples.setdefault((tuple(codes), curl.split(" http", 1)[-1].split("?")[0]), (curl, status, body, text))
    lines = [f"{dict(counts)}"] + [f"{codes} -> {status}: {curl}\n    {body!r}\n    {text[:600]}"
                                  for (codes, _), (curl, status, body, text) in examples.items()]
    return "\n".join(lines)


@pytest.fixture(scope="module")
def own_stack(service, store_url, run_dir):
    """A front (and scheduler) of the stateful run's own, on a database and broker vhost
    nobody else uses and with no worker: every draw meets only the state the run itself
    made, so a schema-valid request refused is the document's fault or the server's, never
    another test's leftovers. Accepted work waits in the vhost, deleted with the stack."""
    with private_stack(service, store_url, run_dir, "contract") as stack:
        yield stack


def test_stateful_runs_follow_links_with_no_5xx_and_only_documented_answers(own_stack):
    schema = schemathesis.openapi.from_url(own_stack.base_url + "/openapi.yaml", timeout=30,
                                           config=schemathesis.Config.from_dict(CONFIG))
    # Excluding the rest rather than including /api/v1/: an include is or-ed with the one
    # schemathesis derives from CONFIG's operations, which let the public pages back in.
    api = schema.exclude(path_regex=r"^/(?!api/v1/)").exclude(**OFFLINE)
    teach_schedules(api)
    teach_block_grammar(api)
    teach_sending_rules(api)
    tenant = own_stack.tenant(sandbox=True)
    auth = {"Authorization": f"Bearer {tenant.key}"}
    answered, problems = collections.Counter(), []

    class Scenarios(api.as_state_machine()):
        def before_call(self, case):
            # a body can reach a step without passing the map_body hooks (seen: a POST
            # /templates whose dynamic block had no `source`, answered 400, ST202)
            if (case.method.upper(), case.operation.path) in TEMPLATE_BODIES:
                case.body = with_block_grammar(case.body)
            super().before_call(case)

        def get_call_kwargs(self, case):
            return {"base_url": own_stack.base_url, "headers": auth, "timeout": 30}

        def after_call(self, response, case):
            super().after_call(response, case)  # the recorder the stateful checks read
            answered[(case.operation.label, response.status_code)] += 1

        def validate_response(self, response, case, additional_checks=None, **kwargs):
            # Recorded rather than raised: Hypothesis replays a failing scenario against a
            # server whose state moved on, which only muddles the report.
            try:
                super().validate_response(response, case, **kwargs)
                assert_envelope_on_failure(response, case.operation.label)
            except BaseException as failure:  # noqa: BLE001 - FailureGroup is a BaseExceptionGroup
                problems.append((findings_of(failure), case.as_curl_command(headers=auth), response.status_code,
                                 response.content[:300], str(failure)[:1500]))

    try:
        Scenarios.run(settings=settings(max_examples=SCENARIOS, stateful_step_count=STEPS, deadline=None,
                                        database=None, derandomize=True, phases=[Phase.generate],
                                        suppress_health_check=list(HealthCheck)))
    except Flaky:
        pass  # a replay met another server state (a name taken since): the run so far stands
    # Every finding fails the run: a schema-valid request answered 400 (ST202), a created
    # resource answering 404 (ST302), a 5xx, an undocumented status or shape.
    assert not problems, report(problems)
    # Links were followed: operations on an id answered 2xx (a generated id only meets 404).
    through_links = {label for (label, status), _ in answered.items() if "{" in label and 200 <= status < 300}
    assert len(through_links) >= 5, sorted(answered.items())


def test_the_document_marks_what_the_server_requires_and_links_created_resources(service):
    """Drift schemathesis found: required bodies and parameters not marked required, an
    empty `since=` allowed, path ids as any string; and the links the stateful run needs."""
    document = yaml.safe_load(httpx.get(service.base_url + "/openapi.yaml", timeout=30).text)
    paths = document["paths"]
    trigger_id = next(p for p in paths["/api/v1/webhooks/triggers"]["delete"]["parameters"] if p["name"] == "id")
    assert trigger_id["in"] == "query" and trigger_id["required"] is True
    bodies = {(m, p): op["requestBody"].get("required") for p, ops in paths.items()
              for m, op in ops.items() if "requestBody" in op}
    assert bodies[("post", "/api/v1/contacts")] is True and bodies[("patch", "/api/v1/contacts/{contact_id}")] is True
    assert bodies[("post", "/api/v1/contacts/delete-all")] is False  # no body reads as {} there
    assert all(isinstance(required, bool) for required in bodies.values())
    since = next(p for p in paths["/api/v1/bounces"]["get"]["parameters"] if p["name"] == "since")
    assert since["schema"]["anyOf"] == [{"format": "date", "type": "string"}, {"format": "date-time", "type": "string"}]
    query_schemas = [p["schema"] for ops in paths.values() for op in ops.values()
                     for p in op.get("parameters", []) if p["in"] == "query"]
    assert not any({"type": "null"} in s.get("anyOf", []) for s in query_schemas)  # absent, never null
    contact_id = paths["/api/v1/contacts/{contact_id}"]["get"]["parameters"][0]
    assert contact_id["schema"] == {"type": "string", "format": "uuid"}
    links = paths["/api/v1/contacts"]["post"]["responses"]["201"]["links"]
    assert links["patch_contacts_update_contact"]["parameters"] == {"path.contact_id": "$response.body#/data/id"}
    sent = paths["/api/v1/email/send"]["post"]["responses"]["202"]["links"]
    assert sent["get_email_status"]["parameters"] == {"path.message_id": "$response.body#/data/message_id"}
    trigger_links = paths["/api/v1/webhooks/triggers"]["post"]["responses"]["201"]["links"]
    assert trigger_links["delete_webhooks_delete_trigger"]["parameters"] == {"query.id": "$response.body#/data/id"}
