"""What every API operation answers, for the OpenAPI document: the success status and
shape (`{data: <model>}` or a list page of the model, typed by front/response_models.py
through ANSWERS), the error statuses (all as the one error envelope), the rate-limit and
idempotency headers, and the Idempotency-Key request header. Read from the view itself
where the code says it (the `idempotent` decorator, the list query model), so the
document follows the code."""

from __future__ import annotations

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from . import response_models as m
from .auth import EMAIL_ENDPOINT_PREFIX
from .idempotency import IDEMPOTENCY_ATTRIBUTE, MAX_KEY_LENGTH
from .pagination import PageQuery

# Success statuses other than 200, keyed by endpoint (blueprint.view). tests/front/test_openapi.py
# compares this table with the statuses each view's code returns, so it cannot drift.
SUCCESS_STATUSES: dict[str, tuple[int, ...]] = {
    "email.send": (200, 201, 202),  # 200 all suppressed, 201 scheduled (send_at), 202 queued
    "email.send_batch": (202,),
    "campaigns.create": (201,),
    "campaigns.send": (202,),
    "contacts.create_contact": (201,),
    "contacts.start_import": (202,),
    "contacts.start_export": (201,),
    "tags.create_tag": (201,),
    "lists.create_list": (201,),
    "segments.create_segment": (201,),
    "templates.create_template": (201,),
    "domains.add_domain": (201,),
    "suppressions.add_suppression": (201,),
    "webhooks.create_webhook": (201,),
    "webhooks.create_trigger": (201,),
    "inbound.create_route": (201,),
    "inbound.add_domain": (201,),
    "tracking.product_view": (201,),
    "conversions.create": (201,),
    "forms.create_form": (201,),
    "automations.create_automation": (201,),
    "automations.add_step": (201,),
    "automations.trigger": (201,),
}
# The model of each operation's `data` (of each item, for a list), keyed by endpoint; a dict
# when the shape differs per success status. tests/front/test_openapi.py checks that every
# /api/v1 operation has one, and every live answer the tests get is checked against it.
ANSWERS: dict[str, type[BaseModel] | dict[int, type[BaseModel]]] = {
    "health.health": m.Health,
    "api_key.permissions": m.KeyPermissions,
    "email.send": {200: m.EmailAccepted, 201: m.EmailScheduled, 202: m.EmailAccepted},
    "email.send_batch": m.BatchAccepted,
    "email.batch_status": m.BatchStatus,
    "email.status": m.EmailStatus,
    "email.cancel": m.EmailCancelled,
    "email.list_emails": m.EmailListItem,
    "email.get_email": m.EmailDetail,
    "contacts.list_contacts": m.Contact,
    "contacts.create_contact": m.ContactWithLists,
    "contacts.get_contact": m.ContactWithLists,
    "contacts.update_contact": m.ContactWithLists,
    "contacts.delete_contact": m.Deleted,
    "contacts.bulk_delete": m.BulkDeleted,
    "contacts.delete_all": m.DeletedAll,
    "contacts.restore": m.Restored,
    "contacts.activity_log": m.Activity,
    "contacts.duplicates": m.ContactWithLists,
    "contacts.start_import": m.ContactJob,
    "contacts.get_import": m.ContactJob,
    "contacts.start_export": m.ContactJob,
    "contacts.get_export": m.ContactJob,
    "tags.list_tags": m.Tag,
    "tags.create_tag": m.Tag,
    "tags.get_tag": m.Tag,
    "tags.update_tag": m.Tag,
    "tags.delete_tag": m.Deleted,
    "tags.tag_contacts": m.Contact,
    "tags.assign": m.TagAssigned,
    "tags.unassign": m.TagRemoved,
    "lists.list_lists": m.ContactList,
    "lists.create_list": m.ContactList,
    "lists.get_list": m.ContactList,
    "lists.update_list": m.ContactList,
    "lists.delete_list": m.Deleted,
    "lists.members": m.Contact,
    "lists.add_members": m.MembersAdded,
    "lists.remove_members": m.MembersRemoved,
    "segments.list_segments": m.Segment,
    "segments.create_segment": m.Segment,
    "segments.get_segment": m.Segment,
    "segments.update_segment": m.Segment,
    "segments.delete_segment": m.Deleted,
    "segments.segment_contacts": m.Contact,
    "segments.estimate": m.SegmentEstimate,
    "templates.create_template": m.Template,
    "templates.list_templates": m.TemplateSummary,
    "templates.render_template_structure": m.RenderedHtml,
    "templates.get_template": m.Template,
    "templates.update_template": m.Template,
    "templates.delete_template": m.Deleted,
    "templates.list_template_versions": m.TemplateVersionSummary,
    "templates.get_template_version": m.TemplateVersion,
    "templates.restore_template_version": m.Template,
    "campaigns.create": m.Campaign,
    "campaigns.list_campaigns": m.Campaign,
    "campaigns.read": m.Campaign,
    "campaigns.send": m.CampaignSending,
    "campaigns.schedule": m.Campaign,
    "campaigns.cancel": m.Campaign,
    "campaigns.pause": m.Campaign,
    "campaigns.resume": m.Campaign,
    "domains.add_domain": m.Domain,
    "domains.list_domains": m.Domain,
    "domains.get_domain": m.Domain,
    "domains.verify_domain": m.DomainCheck,
    "domains.delete_domain": m.Deleted,
    "suppressions.list_suppressions": m.Suppression,
    "suppressions.add_suppression": m.Suppression,
    "suppressions.remove_suppression": m.SuppressionDeleted,
    "bounces.list_bounces": m.Bounce,
    "bounces.get_bounce": m.Bounce,
    "analytics.analytics": m.Analytics,
    "webhooks.create_trigger": m.CreatedSubscription,
    "webhooks.list_triggers": m.Subscription,
    "webhooks.delete_trigger": m.Success,
    "webhooks.create_webhook": m.CreatedSubscription,
    "webhooks.get_webhook": m.Subscription,
    "webhooks.delete_webhook": m.Success,
    "webhooks.rotate_secret": m.RotatedSecret,
    "webhooks.test_webhook": m.WebhookTest,
    "webhooks.list_deliveries": m.Delivery,
    "tracking.product_view": m.ProductView,
    "conversions.create": m.Conversion,
    "conversions.list_conversions": m.Conversion,
    "automations.list_automations": m.Automation,
    "automations.create_automation": m.Automation,
    "automations.get_automation": m.Automation,
    "automations.update_automation": m.Automation,
    "automations.delete_automation": m.AutomationDeleted,
    "automations.add_step": m.AutomationStep,
    "automations.replace_steps": m.Automation,
    "automations.update_step": m.AutomationStep,
    "automations.delete_step": m.Deleted,
    "automations.trigger": m.AutomationRun,
    "automations.list_runs": m.AutomationRun,
    "automations.cancel_run": m.AutomationRun,
    "forms.list_forms": m.Form,
    "forms.create_form": m.Form,
    "forms.get_form": m.Form,
    "forms.update_form": m.Form,
    "forms.delete_form": m.Deleted,
    "inbound.inbound_address": m.InboundAddress,
    "inbound.create_route": m.CreatedInboundRoute,
    "inbound.list_routes": m.InboundRoute,
    "inbound.get_route": m.InboundRoute,
    "inbound.delete_route": m.Deleted,
    "inbound.rotate_route_secret": m.InboundRouteSecret,
    "inbound.list_messages": m.InboundMessage,
    "inbound.get_message": m.InboundMessageDetail,
    "inbound.add_domain": m.InboundDomain,
    "inbound.list_domains": m.InboundDomain,
    "inbound.get_domain": m.InboundDomain,
    "inbound.verify_domain": m.InboundDomainCheck,
    "inbound.delete_domain": m.Deleted,
}


# Operations whose success is a file, not JSON: endpoint → (content type, description).
FILE_ANSWERS = {"contacts.download_export": ("text/csv", "The contacts as CSV (UTF-8, a header row), streamed."),
                "inbound.raw_message": ("message/rfc822", "The message exactly as received (an .eml file).")}


def answer_model(endpoint: str, status: int) -> type[BaseModel] | None:
    found = ANSWERS.get(endpoint)
    return found.get(status) if isinstance(found, dict) else found


def answer_schemas() -> dict:
    """The JSON schemas of every answer model (and the models they use), by name, for
    components.schemas."""
    models = {mod for v in ANSWERS.values() for mod in (v.values() if isinstance(v, dict) else [v])}
    _, top = models_json_schema([(model, "serialization") for model in sorted(models, key=lambda c: c.__name__)],
                                ref_template="#/components/schemas/{model}")
    return top.get("$defs", {})


def _answer_ref(model: type[BaseModel] | None) -> dict:
    return _ref("schemas", model.__name__) if model is not None else {"description": "The operation's result."}


def _data_schema(model: type[BaseModel] | None, listing: bool) -> dict:
    """`{data: Model}`, or a page: `{data: [Model], pagination}`."""
    if listing:
        return {"type": "object", "required": ["data", "pagination"],
                "properties": {"data": {"type": "array", "items": _answer_ref(model)},
                               "pagination": _ref("schemas", "Pagination")}}
    return {"type": "object", "required": ["data"], "properties": {"data": _answer_ref(model)}}


# Non-error answers outside 2xx: the health check reports a degraded service in the `{data}` shape.
DEGRADED_STATUSES = {"health.health": (503, "Degraded: the body says whether the store or the broker is unreachable.")}
SUCCESS_DESCRIPTIONS = {200: "Success.", 201: "Created.", 202: "Accepted: the work continues asynchronously."}

ERROR_DESCRIPTIONS = {
    400: "Invalid request (validation_error, with `path` naming the field).",
    401: "Missing, malformed, unknown or revoked API key (unauthorized).",
    403: "The API key lacks the permission this operation needs (forbidden).",
    404: "No such resource in this workspace, or the key's workspace is gone (workspace_not_found).",
    409: "Conflict with the current state, or an Idempotency-Key reused with another body "
         "(idempotency_conflict).",
    429: "Rate limit exceeded; wait Retry-After seconds.",
    500: "Unexpected error (internal_error); safe to retry with backoff.",
    503: "The service cannot reach its database (service_unavailable); retry after Retry-After "
         "seconds. A send whose message says its outcome is unknown names its message id: retry "
         "with the same Idempotency-Key to get that message, sent once.",
}
WRITE_METHODS = {"post", "put", "patch", "delete"}

SCHEMAS = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "description": "Machine-readable, e.g. validation_error."},
                "message": {"type": "string", "description": "Human-readable."},
                "path": {"type": "string", "description": "The offending field, written a.b[2].c."},
            },
        }},
    },
    "Pagination": {
        "type": "object",
        "required": ["total", "limit", "offset", "has_more"],
        "properties": {
            "total": {"type": "integer", "minimum": 0, "description": "Items matching, over all pages."},
            "limit": {"type": "integer", "minimum": 1},
            "offset": {"type": "integer", "minimum": 0},
            "has_more": {"type": "boolean", "description": "offset + items on this page < total."},
            "next_cursor": {"type": ["string", "null"],
                            "description": "GET /email only: pass as `cursor` for the next page (null: none)."},
            "total_exact": {"type": "boolean", "description": "GET /email only: false when `total` is an upper "
                            "bound (a tag, metadata pair or second recipient narrowed further, over 100 matches)."},
        },
    },
}

_RATE_HEADERS = {
    "Limit": ({"type": "integer"}, "Requests allowed per window."),
    "Remaining": ({"type": "integer"}, "Requests left in the current window."),
    "Reset": ({"type": "string", "format": "date-time"}, "When the window resets (ISO 8601)."),
}
HEADERS = {
    **{f"X-RateLimit-{part}": {"description": f"Per key: {text}", "schema": schema}
       for part, (schema, text) in _RATE_HEADERS.items()},
    **{f"X-EmailRateLimit-{part}": {"description": f"Per key, email sends only, counted in emails (a batch "
                                                   f"costs its number of messages): {text}", "schema": schema}
       for part, (schema, text) in _RATE_HEADERS.items()},
    "Retry-After": {"description": "Seconds to wait before retrying.", "schema": {"type": "integer", "minimum": 0}},
    "X-Idempotency-Status": {"description": "`new` on the first request with an Idempotency-Key, "
                                            "`cached` on a replay of it.",
                             "schema": {"type": "string", "enum": ["new", "cached"]}},
}


def _ref(kind: str, name: str) -> dict:
    return {"$ref": f"#/components/{kind}/{name}"}


def _json(schema_name: str) -> dict:
    return {"application/json": {"schema": _ref("schemas", schema_name)}}


def idempotency_of(view) -> str | None:
    """"required", "optional", or None when the view takes no Idempotency-Key."""
    return getattr(view, IDEMPOTENCY_ATTRIBUTE, None)


def is_list(querystring_model) -> bool:
    return isinstance(querystring_model, type) and issubclass(querystring_model, PageQuery)


def idempotency_parameter(mode: str) -> dict:
    required = mode == "required"
    return {
        "name": "Idempotency-Key", "in": "header", "required": required,
        "description": ("Required. " if required else "Optional. ")
        + "The first request executes and its response is kept for an hour; a replay with the same "
          "body answers that response, another body answers 409 idempotency_conflict.",
        # an empty value counts as none (front/idempotency.py): refused only where one is required
        "schema": {"type": "string", "minLength": 1 if required else 0, "maxLength": MAX_KEY_LENGTH},
    }


# Request bodies that are not a pydantic model (so quart-schema cannot describe them),
# keyed by endpoint. The import's CSV: a header naming `email` first (any order works;
# this is the simplest file the document can promise), then any rows: a bad row is an
# error of the job, not of the request.
RAW_REQUEST_BODIES: dict[str, dict] = {
    "contacts.start_import": {"required": True, "content": {"text/csv": {"schema": {
        "type": "string", "pattern": r"^email(\r?\n[\s\S]*)?$",
        "description": "UTF-8 CSV, a BOM allowed: a header row with an `email` column (other columns: "
                       "first_name, last_name, subscribed, attributes as `name` or `name:type`), then rows."}}}},
}


_RATE_LIMIT_HEADERS = ["X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset"]
_EMAIL_RATE_LIMIT_HEADERS = ["X-EmailRateLimit-Limit", "X-EmailRateLimit-Remaining", "X-EmailRateLimit-Reset"]


def _rate_headers(endpoint: str, method: str, public: bool) -> list[str]:
    """The rate-limit headers an operation answers with: none on a public one, the email
    window's too on an email send."""
    if public:
        return []
    if endpoint.startswith(EMAIL_ENDPOINT_PREFIX) and method == "post":
        return _RATE_LIMIT_HEADERS + _EMAIL_RATE_LIMIT_HEADERS
    return list(_RATE_LIMIT_HEADERS)


def _success_content(endpoint: str, status: int, listing: bool) -> dict:
    if endpoint in FILE_ANSWERS:
        content_type, description = FILE_ANSWERS[endpoint]
        return {content_type: {"schema": {"type": "string", "description": description}}}
    return {"application/json": {"schema": _data_schema(answer_model(endpoint, status), listing)}}


def _success_responses(endpoint: str, listing: bool, headers: dict) -> dict:
    responses: dict = {}
    for status in SUCCESS_STATUSES.get(endpoint, (200,)):
        responses[str(status)] = {"description": SUCCESS_DESCRIPTIONS[status],
                                  "content": _success_content(endpoint, status, listing)}
        if headers:
            responses[str(status)]["headers"] = dict(headers)
    return responses


def _degraded_responses(endpoint: str) -> dict:
    """The health check's 503 in the `{data}` shape; nothing for any other operation."""
    if endpoint not in DEGRADED_STATUSES:
        return {}
    status, description = DEGRADED_STATUSES[endpoint]
    model = answer_model(endpoint, status) or answer_model(endpoint, 200)
    return {str(status): {"description": description,
                          "content": {"application/json": {"schema": _data_schema(model, False)}},
                          "headers": {"Retry-After": _ref("headers", "Retry-After")}}}


def _error_statuses(endpoint: str, method: str, *, public: bool, takes_body_or_key: bool) -> list[int]:
    """The error statuses an operation may answer, in order."""
    errors = [500] + ([] if endpoint in DEGRADED_STATUSES else [503])
    if not public:
        errors += [401, 403, 404, 429]
        if takes_body_or_key:
            errors.append(400)
        if method in WRITE_METHODS:
            errors.append(409)
    return sorted(errors)


def _error_response(status: int, rate: list[str]) -> dict:
    response = {"description": ERROR_DESCRIPTIONS[status], "content": _json("Error")}
    # 401 and 503 answer before (or without) counting against a window
    headers = {name: _ref("headers", name) for name in rate} if status not in (401, 503) else {}
    if status in (429, 503):
        headers["Retry-After"] = _ref("headers", "Retry-After")
    if headers:
        response["headers"] = headers
    return response


def api_responses(endpoint: str, method: str, *, public: bool, listing: bool,
                  idempotency: str | None, has_inputs: bool) -> dict:
    """The Responses object of one /api/v1 operation: its successes, the health check's
    degraded answer, its errors, and the envelope for anything else."""
    rate = _rate_headers(endpoint, method, public)
    success_headers = {name: _ref("headers", name) for name in rate}
    if idempotency:
        success_headers["X-Idempotency-Status"] = _ref("headers", "X-Idempotency-Status")
    responses = {**_success_responses(endpoint, listing, success_headers), **_degraded_responses(endpoint)}
    error_statuses = _error_statuses(endpoint, method, public=public,
                                     takes_body_or_key=bool(has_inputs or idempotency))
    for status in error_statuses:
        responses[str(status)] = _error_response(status, rate)
    responses["default"] = {"description": "Any other failure, as the error envelope.", "content": _json("Error")}
    return responses
