"""Inbound mail (docs/inbound.md): the workspace's inbound address, its routes (a pattern
on the recipient → a URL posted `email.received`, signed as webhooks are), and the
messages received, parsed and raw. Permissions `inbound:read` / `inbound:write`."""

from __future__ import annotations

from typing import Annotated

from pydantic import ConfigDict, Field, StringConstraints, field_validator
from quart import Blueprint

from mongo import inbound_domains as domain_store
from mongo import inbound_messages as message_store
from mongo import inbound_routes as route_store
from pipelines import views
from pipelines.adapters.dns_client import DnsPythonResolver
from pipelines.inbound_routes.addresses import MAX_PATTERN_LENGTH, PATTERN_REGEX, pattern_problem
from pipelines.workflows import manage_inbound_domains, manage_inbound_routes

from ..lookup import found, no_such, owned
from ..pagination import CursorPageQuery, PageQuery, cursor_page
from ..resource_routes import delete_route, list_route, read_route
from ..responses import one, streamed
from ..runtime import caller, db, settings
from ..types import JsonInteger, Strict, Uuid
from ..validation import body, query
from .bounces import Since, Until
from .domains import DomainName, refuse_service_domains
from .webhooks import TargetUrl, check_target

bp = Blueprint("inbound", __name__, url_prefix="/api/v1")

Pattern = Annotated[str, StringConstraints(min_length=1, max_length=MAX_PATTERN_LENGTH), Field(
    json_schema_extra={"pattern": PATTERN_REGEX},
    description="Which recipients the route takes, matched lower-cased: `*` (all), an address (also with any "
                "`+tag`), or an address with `*` wildcards (`<token>+ticket-*@inbound.example`, "
                "`*@support.acme.example`).")]
Address = Annotated[str, StringConstraints(min_length=3, max_length=254)]


class CreateRoute(Strict):
    pattern: Pattern
    url: TargetUrl
    priority: JsonInteger = Field(100, ge=0, le=1000, description="Routes are tried by priority (lower first), then "
                                                           "oldest first; the first whose pattern matches "
                                                           "takes the message. Default 100.")
    description: Annotated[str, StringConstraints(max_length=200)] | None = None

    @field_validator("pattern")
    @classmethod
    def _pattern(cls, value: str) -> str:
        problem = pattern_problem(value)
        if problem:
            raise ValueError(problem)
        return value.lower()


class AddInboundDomain(Strict):
    domain: DomainName = Field(description="A domain to receive mail at, e.g. `replies.acme.example` (lower-cased; "
                                           "no trailing dot): every address at it is the workspace's once verified.")


class MessageQuery(CursorPageQuery):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)
    route_id: Uuid | None = Field(None, description="Only messages this route took.")
    recipient: Address | None = Field(None, description="Only messages to this address, `+tag` included (any "
                                                        "letter case).")
    from_: Address | None = Field(None, alias="from", description="Only messages whose From address is this "
                                                                  "(any letter case).")
    since: Since | None = Field(None, description="Received at or after this moment: an ISO 8601 date (start "
                                                  "of that day, UTC) or date-time (no offset means UTC).")
    until: Until | None = Field(None, description="Received before this moment: an ISO 8601 date-time, or a "
                                                  "date meaning the end of that day (UTC).")

    def filters(self) -> message_store.Filters:
        since_ms, until_ms = self.window_ms()
        return message_store.Filters(route_id=self.route_id, recipient=self.recipient, sender=self.from_,
                                     since_ms=since_ms, until_ms=until_ms)


@bp.get("/inbound/address")
async def inbound_address():
    """The workspace's inbound address on the operator's inbound domain (made on first use)."""
    return one(await manage_inbound_routes.address(db(), settings(), caller().workspace_id))


@bp.post("/inbound/routes")
@body(CreateRoute)
async def create_route(data: CreateRoute):
    """A route: mail to a matching recipient is posted to `url` as `email.received`, signed
    with the route's secret (returned only here). 201."""
    check_target(data.url, "url")
    route, secret = await manage_inbound_routes.create_route(
        db(), settings(), caller().workspace_id, pattern=data.pattern, target_url=data.url, priority=data.priority,
        description=data.description)
    return one({**views.inbound_route(route), "secret": secret}, 201)


list_route(bp, "/inbound/routes", "list_routes", PageQuery, route_store.list_page, view=views.inbound_route,
           summary="The workspace's routes in the order they are tried.")
read_route(bp, "/inbound/routes/<uuid:route_id>", "get_route", route_store, "inbound route", views.inbound_route,
           summary="One route.")
delete_route(bp, "/inbound/routes/<uuid:route_id>", "delete_route", manage_inbound_routes.delete_route,
             "inbound route")


@bp.post("/inbound/routes/<uuid:route_id>/rotate-secret")
async def rotate_route_secret(route_id: str):
    """Replace the route's signing secret at once; the new one is returned only here."""
    route, secret = await manage_inbound_routes.rotate_secret(db(), settings(), caller().workspace_id, route_id)
    await found(route, no_such("inbound route"))
    return one({"id": route_id, "secret": secret, "rotated_at": route["secret_rotated_at"]})


@bp.get("/inbound/messages")
@query(MessageQuery)
async def list_messages(params: MessageQuery):
    """Messages received at the workspace's inbound addresses, newest first."""
    items, total = await message_store.page(db(), caller().workspace_id, params.filters(), limit=params.limit,
                                            offset=params.offset, after=params.after())
    return cursor_page(items, total, params, lambda d: (d["received_ms"], d["_id"]), views.inbound_message)


@bp.get("/inbound/messages/<uuid:message_id>")
async def get_message(message_id: str):
    """One received message: envelope, verdicts (SPF, DKIM, DMARC) and the parsed message."""
    return one(views.inbound_message(await owned(message_store, message_id, "inbound message"), full=True))


@bp.get("/inbound/messages/<uuid:message_id>/raw")
async def raw_message(message_id: str):
    """The message as received (message/rfc822, an `.eml` download)."""
    doc = await owned(message_store, message_id, "inbound message")
    return streamed(await message_store.raw(db(), doc), "message/rfc822", f"{message_id}.eml", 200)


@bp.post("/inbound/domains")
@body(AddInboundDomain)
async def add_domain(data: AddInboundDomain):
    """A domain of the workspace's own to receive at: the answer lists the records to
    publish (an MX to the operator's inbound host, a verification TXT). 201."""
    refuse_service_domains(data.domain)
    return one(views.inbound_domain(await manage_inbound_domains.add(db(), settings(), caller().workspace_id,
                                                                     data.domain)), 201)


list_route(bp, "/inbound/domains", "list_domains", PageQuery, domain_store.list_page, view=views.inbound_domain,
           summary="The workspace's inbound domains, oldest first.")
read_route(bp, "/inbound/domains/<uuid:domain_id>", "get_domain", domain_store, "inbound domain",
           views.inbound_domain, summary="One inbound domain with its records' last check.")


@bp.post("/inbound/domains/<uuid:domain_id>/verify")
async def verify_domain(domain_id: str):
    """Look the records up; once both hold the workspace receives at the domain (409 when
    another workspace proved it first)."""
    doc = await owned(domain_store, domain_id, "inbound domain")
    checked = await manage_inbound_domains.verify(db(), DnsPythonResolver(settings().dns_resolver), doc)
    saved = await found(checked.domain, no_such("inbound domain"))
    return one({**views.inbound_domain(saved), "failed_records": checked.failed_records})


delete_route(bp, "/inbound/domains/<uuid:domain_id>", "delete_domain", manage_inbound_domains.delete,
             "inbound domain")
