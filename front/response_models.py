"""What each /api/v1 operation answers inside `data`, as pydantic models: the OpenAPI
document publishes their JSON schemas (front/openapi_responses.py, table ANSWERS), so a
client generated from /openapi.yaml gets typed results. They describe the dicts the views
build (pipelines/views.py, one function a resource); the test suite checks
every live answer against the published schema (tests/support/openapi_check.py), so a
view and its model cannot drift apart unnoticed.

Fields a view always writes are required (nullable where they can be null); timestamps
are ISO 8601 strings (`format: date-time`). Answers may grow fields: the schemas do not
forbid unknown ones."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

from pydantic import BaseModel, Field

Timestamp = dt.datetime


class Answer(BaseModel):
    """Base of every answer model."""


# --- platform ------------------------------------------------------------------------------

class Health(Answer):
    status: str = Field(description="ok or degraded.")
    store: str = Field(description="ok or unreachable.")
    broker: str = Field(description="ok or unreachable.")
    version: str


class KeyPermissions(Answer):
    id: str
    name: str
    type: str = Field(description="live or sandbox.")
    permissions: list[str]
    rate_limit: int = Field(description="Requests per minute.")
    email_rate_limit: int = Field(description="Emails per minute.")
    is_sandbox: bool
    workspace_id: str
    created_at: Timestamp


class Deleted(Answer):
    id: str
    deleted: bool


class Success(Answer):
    success: bool


# --- email -----------------------------------------------------------------------------------

class EmailAccepted(Answer):
    message_id: str
    status: str = Field(description="queued, or suppressed when every recipient is suppressed.")
    to: list[str]
    suppressed_recipients: list[str]
    sandbox: bool


class EmailScheduled(Answer):
    scheduled: bool
    message_id: str
    scheduled_at: Timestamp


class BatchAccepted(Answer):
    batch_id: str
    status: str
    total: int
    message_ids: list[str]


class BatchCounts(Answer):
    queued: int
    sent: int
    delivered: int
    bounced: int
    failed: int
    suppressed: int
    cancelled: int


class BatchStatus(Answer):
    batch_id: str
    status: str = Field(description="processing, completed or failed.")
    total: int
    counts: BatchCounts
    created_at: Timestamp
    completed_at: Timestamp | None


class HistoryEntry(Answer):
    status: str
    at: Timestamp
    detail: str | None = None


class AttachmentShown(Answer):
    filename: str
    content_type: str
    content_id: str | None = Field(description="Set: an inline file, shown by the HTML as cid:<content_id>.")
    size: int = Field(description="Bytes, decoded.")


class EmailStatus(Answer):
    message_id: str
    status: str
    to: list[str]
    cc: list[str]
    bcc: list[str] = Field(description="Recipients in the envelope only (never in a header).")
    subject: str
    metadata: dict[str, str]
    tags: list[str]
    attachments: list[AttachmentShown]
    created_at: Timestamp
    scheduled_at: Timestamp | None
    queued_at: Timestamp | None
    sent_at: Timestamp | None
    delivered_at: Timestamp | None
    opened_at: Timestamp | None
    clicked_at: Timestamp | None
    bounced_at: Timestamp | None
    failed_at: Timestamp | None
    cancelled_at: Timestamp | None
    error: str | None
    smtp_response: str | None
    sandbox: bool
    batch_id: str | None
    history: list[HistoryEntry]
    suppressed_recipients: list[str]


class EmailCancelled(Answer):
    message_id: str
    status: str


class EmailListItem(Answer):
    """One message of GET /email (no bodies, no timeline)."""
    id: str
    to: list[str]
    subject: str
    status: str
    stream: Literal["transactional", "marketing"] | None
    campaign_id: str | None
    batch_id: str | None
    tags: list[str]
    metadata: dict[str, str]
    created_at: Timestamp
    sent_at: Timestamp | None
    delivered_at: Timestamp | None


class TimelineEvent(Answer):
    """One event of a message's timeline; which fields it has depends on its `type`."""
    type: Literal["accepted", "queued", "scheduled", "rendered", "smtp_attempt", "deferred", "sent", "delivered",
                  "bounced", "bounce_report", "failed", "cancelled", "suppressed", "opened", "clicked",
                  "complained", "unsubscribed"]
    at: Timestamp
    status: str | None = Field(None, description="accepted: the status the message was accepted in.")
    detail: str | None = Field(None, description="The status move's reason: a deferral's SMTP reply and next "
                                                 "attempt time, a delivery's or bounce's reply, a failure's cause.")
    code: int | None = Field(None, description="smtp_attempt: the reply code (0: no answer, e.g. no connection).")
    text: str | None = Field(None, description="smtp_attempt: the reply text (at most 500 characters).")
    outcome: Literal["deferred", "delivered", "bounced", "failed"] | None = Field(
        None, description="smtp_attempt: what the attempt led to.")
    next_attempt_at: Timestamp | None = Field(None, description="smtp_attempt deferred: when the next one is due.")
    recipients: dict[str, int] | None = Field(None, description="smtp_attempt: each recipient's reply code.")
    url: str | None = Field(None, description="clicked: the link.")
    count: int | None = Field(None, description="opened/clicked/unsubscribed from the counts: how many.")
    email: str | None = Field(None, description="bounce_report/complained: the recipient reported.")
    bounce_type: str | None = Field(None, description="bounce_report: permanent, transient or undetermined.")
    category: str | None = None
    smtp_status: str | None = None
    diagnostic: str | None = Field(None, description="bounce_report: the report's diagnostic code.")
    source: str | None = None
    bounce_id: str | None = Field(None, description="bounce_report/complained: the record in GET /bounces/:id.")


class EmailDetail(EmailListItem):
    """GET /email/:id: the message and its timeline."""
    error: str | None
    smtp_response: str | None
    sandbox: bool
    suppressed_recipients: list[str]
    bodies_dropped: bool = Field(description="Its bodies are gone (POSTROOM_MESSAGE_BODY_RETENTION_DAYS).")
    timeline: list[TimelineEvent]


# --- audience --------------------------------------------------------------------------------

class TagRef(Answer):
    id: str
    name: str


class Contact(Answer):
    id: str
    email: str
    first_name: str | None
    last_name: str | None
    attributes: dict[str, Any]
    subscribed: bool
    bounced: bool
    tags: list[TagRef] = Field(description="The tags the contact carries, {id, name} as `lists` are.")
    created_at: Timestamp
    updated_at: Timestamp
    unsubscribed_at: Timestamp | None


class ListRef(Answer):
    id: str
    name: str


class ContactWithLists(Contact):
    lists: list[ListRef] = Field(description="Static lists holding the contact and dynamic lists it matches.")


class BulkDeleted(Answer):
    deleted: int
    not_found: list[str]


class DeletedAll(Answer):
    deleted: int
    deletion_id: str
    restorable_until: Timestamp
    activity_id: str


class Restored(Answer):
    deletion_id: str
    restored: int
    skipped: list[str] = Field(description="Addresses re-created since, which stay deleted.")
    activity_id: str


class Activity(Answer):
    id: str
    action: str
    key_id: str | None
    details: dict[str, Any]
    at: Timestamp


class ImportRowError(Answer):
    line: int
    message: str
    email: str | None = None


class ContactJob(Answer):
    """A contact import or export job; counters appear as an import runs."""
    id: str
    kind: str = Field(description="import or export.")
    status: str = Field(description="queued, running, completed or failed (imports); ready (exports).")
    created_at: Timestamp
    started_at: Timestamp | None
    finished_at: Timestamp | None
    list_id: str | None = None
    tag_id: str | None = None
    segment_id: str | None = None
    file_bytes: int | None = None
    rows: int | None = None
    created: int | None = None
    updated: int | None = None
    unchanged: int | None = None
    duplicates: int | None = None
    suppressed: int | None = None
    error_count: int | None = None
    errors: list[ImportRowError] | None = None
    failure: str | None = None
    expires_at: Timestamp | None = None
    download_url: str | None = Field(None, description="Exports: where the CSV is downloaded.")


class Tag(Answer):
    id: str
    name: str
    color: str
    description: str | None
    contact_count: int
    created_at: Timestamp
    updated_at: Timestamp


class TagAssigned(Answer):
    tag_id: str
    assigned: int
    already_assigned: int
    not_found: list[str]


class TagRemoved(Answer):
    tag_id: str
    removed: int
    not_assigned: int
    not_found: list[str]


class RuleView(Answer):
    field: str
    operator: str
    value: Any = None


class ConditionsView(Answer):
    match: str = "all"
    rules: list[RuleView]


class ContactList(Answer):
    id: str
    name: str
    description: str | None
    type: str = Field(description="static or dynamic.")
    conditions: ConditionsView | None
    member_count: int
    created_at: Timestamp
    updated_at: Timestamp


class MembersAdded(Answer):
    list_id: str
    added: int
    already_members: int
    not_found: list[str]


class MembersRemoved(Answer):
    list_id: str
    removed: int
    not_members: int
    not_found: list[str]


class Segment(Answer):
    id: str
    name: str
    description: str | None
    conditions: ConditionsView
    created_at: Timestamp
    updated_at: Timestamp


class SegmentEstimate(Answer):
    segment_id: str
    count: int


# --- templates -------------------------------------------------------------------------------

class TemplateSummary(Answer):
    id: str
    name: str
    description: str | None
    version: int
    created_at: Timestamp
    updated_at: Timestamp


class Template(TemplateSummary):
    html: str
    json_structure: dict[str, Any] | None


class TemplateVersionSummary(Answer):
    template_id: str
    version: int
    name: str
    description: str | None
    restored_from: int | None
    created_at: Timestamp


class TemplateVersion(TemplateVersionSummary):
    html: str
    json_structure: dict[str, Any] | None


class RenderedHtml(Answer):
    html: str


# --- campaigns -------------------------------------------------------------------------------

class CampaignStats(Answer):
    recipients: int
    sent: int
    delivered: int
    opened: int
    opens_total: int
    clicked: int
    clicks_total: int
    bounced: int
    complained: int
    unsubscribed: int
    failed: int
    suppressed: int
    cancelled: int
    pending: int


class CampaignRates(Answer):
    delivery_rate: float
    bounce_rate: float
    open_rate: float
    click_rate: float
    click_to_open_rate: float
    unsubscribe_rate: float
    complaint_rate: float


class Campaign(Answer):
    id: str
    name: str
    subject: str
    template_id: str
    list_id: str | None
    segment_id: str | None
    status: str = Field(description="draft, scheduled, sending, paused (beside the spec), sent, cancelled or failed.")
    from_email: str | None
    from_name: str | None
    reply_to: str | None
    track_opens: bool
    track_clicks: bool
    scheduled_at: Timestamp | None
    created_at: Timestamp
    updated_at: Timestamp
    started_at: Timestamp | None
    completed_at: Timestamp | None
    cancelled_at: Timestamp | None
    failure_reason: str | None
    total_recipients: int
    batches_queued: int
    stats: CampaignStats
    rates: CampaignRates
    stats_at: Timestamp | None


class CampaignSending(Answer):
    campaign_id: str
    status: str
    total_recipients: int
    batches_queued: int


# --- delivery --------------------------------------------------------------------------------

class DnsRecord(Answer):
    type: str
    name: str
    value: str
    purpose: str = Field(description="verification, dkim or return_path (optional).")
    verified: bool
    status: str = Field(description="verified, missing, mismatch, key_not_published or lookup_failed "
                                    "(pending before the first check).")
    checked_at: Timestamp | None = None
    txt_value: str | None = None
    priority: int | None = Field(None, description="An MX record's preference.")


class DkimKey(Answer):
    selector: str
    algorithm: str
    key_bits: int


class DmarcRecord(Answer):
    type: str = Field(description="TXT.")
    name: str = Field(description="`_dmarc.<domain>`.")
    value: str = Field(description="The record we recommend publishing (`v=DMARC1; p=none`): Gmail and Yahoo "
                                   "require a DMARC record of bulk senders.")
    status: str = Field(description="pending (not checked yet), verified (a `v=DMARC1` record found here or at a "
                                    "parent domain's `_dmarc`), missing or lookup_failed. Only a warning: the domain "
                                    "verifies and sends without it.")
    found: str | None = Field(description="The DMARC record found at the last check.")
    found_at: str | None = Field(description="Where it was found (a parent's policy covers its subdomains).")
    checked_at: Timestamp | None


class Domain(Answer):
    id: str
    domain: str
    verified: bool
    verified_at: Timestamp | None
    dkim: DkimKey
    dns_records: list[DnsRecord]
    dmarc: DmarcRecord
    created_at: Timestamp
    last_checked_at: Timestamp | None


class DomainWarning(Answer):
    purpose: str = Field(description="dmarc.")
    status: str
    message: str


class DomainCheck(Domain):
    failed_records: list[str] = Field(description="Purposes of the records that failed.")
    warnings: list[DomainWarning] = Field(description="What does not stop the domain from sending but costs "
                                                      "deliverability (a missing DMARC record).")


class Suppression(Answer):
    email: str
    reason: str
    source: str
    detail: str | None
    created_at: Timestamp


class SuppressionDeleted(Answer):
    email: str
    deleted: bool


class Bounce(Answer):
    id: str
    message_id: str | None
    email: str
    type: str = Field(description="permanent, transient or undetermined.")
    kind: str = Field(description="bounce or complaint.")
    smtp_status: str | None
    diagnostic_code: str | None
    isp_name: str | None
    source: str = Field(description="dsn, arf or smtp.")
    action: str | None
    reporting_mta: str | None
    feedback_type: str | None
    created_at: Timestamp


class AnalyticsTotals(Answer):
    sends: int
    campaign_sends: int
    api_sends: int
    delivered: int
    opens: int
    clicks: int
    bounces: int


class DailyCount(Answer):
    date: dt.date
    count: int


class Analytics(Answer):
    period: str
    from_: dt.date = Field(alias="from")
    to: dt.date
    totals: AnalyticsTotals
    daily_api_sends: list[DailyCount]


# --- webhooks --------------------------------------------------------------------------------

class Subscription(Answer):
    id: str
    event: str
    events: list[str]
    targetUrl: str
    url: str
    createdAt: Timestamp
    active: bool


class CreatedSubscription(Subscription):
    secret: str = Field(description="The signing secret, shown only in this answer.")


class RotatedSecret(Answer):
    id: str
    secret: str
    rotatedAt: Timestamp


class WebhookTest(Answer):
    success: bool
    status_code: int
    response_time_ms: int
    error: str | None


class DeliveryAttempt(Answer):
    attempt: int
    at: Timestamp
    status_code: int
    duration_ms: int
    error: str | None


class Delivery(Answer):
    id: str
    event: str
    event_id: str
    status: str = Field(description="pending, delivered, failed or cancelled.")
    attempt_count: int
    next_attempt_at: Timestamp | None
    delivered_at: Timestamp | None
    last_status_code: int
    last_error: str | None
    created_at: Timestamp
    attempts: list[DeliveryAttempt]


# --- inbound ---------------------------------------------------------------------------------

class InboundAddress(Answer):
    address: str = Field(description="`<token>@<inbound domain>`: mail to it, or to `<token>+<anything>@…`, "
                                     "is the workspace's.")
    domain: str
    tagged_example: str


class InboundDomain(Answer):
    id: str
    domain: str
    verified: bool
    verified_at: Timestamp | None
    dns_records: list[DnsRecord] = Field(description="An MX (purpose inbound_mx, with its priority) and a TXT "
                                                     "(purpose verification) to publish.")
    created_at: Timestamp
    last_checked_at: Timestamp | None


class InboundDomainCheck(InboundDomain):
    failed_records: list[str] = Field(description="Purposes of the records not (yet) found as published.")


class InboundRoute(Answer):
    id: str
    pattern: str
    url: str
    priority: int
    description: str | None
    created_at: Timestamp


class CreatedInboundRoute(InboundRoute):
    secret: str = Field(description="The signing secret of this route's deliveries, shown only in this answer.")


class InboundRouteSecret(Answer):
    id: str
    secret: str
    rotated_at: Timestamp


class InboundMessage(Answer):
    id: str
    status: str = Field(description="received (being processed), processed or failed.")
    received_at: Timestamp
    recipient: str
    tag: str = Field(description="What followed `+` in the recipient's local part (empty when nothing).")
    from_: str | None = Field(alias="from", description="The From address, once parsed.")
    subject: str | None
    route_id: str | None = Field(description="The route that took it (null: none matched, or not yet routed).")
    auto_submitted: bool = Field(description="An automatic message (auto-reply, vacation notice): stored and "
                                             "marked, never answered.")
    size_bytes: int
    authentication_summary: str | None


class InboundEnvelope(Answer):
    mail_from: str
    rcpt_to: str
    client_ip: str
    helo: str


class InboundMessageDetail(InboundMessage):
    envelope: InboundEnvelope
    authentication: dict[str, Any] | None = Field(description="SPF, DKIM and DMARC verdicts, once processed.")
    message: dict[str, Any] | None = Field(description="The parsed message (docs/inbound.md), once processed; "
                                                      "attachments without their bytes (see /raw).")
    processed_at: Timestamp | None


# --- tracking --------------------------------------------------------------------------------

class ProductView(Answer):
    """The known product fields, and any other product field sent (kept as given)."""
    id: str
    contact_id: str
    contact_email: str
    event: str
    product_id: str
    name: str | None
    price: str | None = Field(description="Decimal string.")
    currency: str | None
    url: str | None
    category: str | None
    image_url: str | None
    metadata: dict[str, Any]
    viewed_at: Timestamp


class Conversion(Answer):
    id: str
    contact_id: str
    contact_email: str
    value: str = Field(description="Decimal string.")
    currency: str
    metadata: dict[str, Any]
    created_at: Timestamp


# --- automations -----------------------------------------------------------------------------

class StepStats(Answer):
    at: int = Field(description="Runs at this step now.")
    passed: int
    failed: int


class AutomationStep(Answer):
    id: str
    step_type: str
    config: dict[str, Any]
    position: int
    stats: StepStats | None = Field(None, description="On a single automation's answers.")


class Automation(Answer):
    id: str
    name: str
    status: str
    trigger_type: str
    trigger_config: dict[str, Any]
    steps: list[AutomationStep]
    created_at: Timestamp
    updated_at: Timestamp
    activated_at: Timestamp | None
    stats: dict[str, int] | None = Field(None, description="Runs by status and `total` (single automation).")


class AutomationDeleted(Deleted):
    runs_cancelled: int


class RunStep(Answer):
    id: str
    position: int | None
    step_type: str | None


class RunContact(Answer):
    id: str
    email: str


class AutomationRun(Answer):
    id: str
    automation_id: str
    contact: RunContact
    status: str
    current_step: RunStep | None
    waiting_for: str | None
    next_wake_at: Timestamp | None
    history: list[dict[str, Any]]
    error: str | None
    trigger: dict[str, Any]
    started_at: Timestamp
    updated_at: Timestamp
    ended_at: Timestamp | None


# --- forms -----------------------------------------------------------------------------------

class FormFieldView(Answer):
    name: str
    type: str = Field(description="text, number, boolean or date.")
    label: str
    required: bool


class FormEmbed(Answer):
    action: str = Field(description="Where a website's form posts (the hosted page's own address).")
    token: str = Field(description="The form's signed token: send it as `token` with every submission.")
    html: str = Field(description="A ready <form> to paste into a website.")


class Form(Answer):
    id: str
    name: str
    list_ids: list[str]
    fields: list[FormFieldView]
    double_opt_in: bool
    title: str
    description: str | None
    submit_label: str
    thank_you_text: str
    confirmation_text: str
    confirmation_email_subject: str
    confirmation_email_text: str
    from_name: str | None
    redirect_url: str | None
    confirmed_redirect_url: str | None
    allowed_origins: list[str]
    hosted_url: str
    embed: FormEmbed
    created_at: Timestamp
    updated_at: Timestamp
