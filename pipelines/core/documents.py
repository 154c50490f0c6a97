"""The stored documents, one TypedDict a collection: the fields the code writes (mongo/'s
inserts and the documents pipelines/ builds for them), so a reader and mypy
(tests/test_types.py) know a document's shape without reading every write.

A key always written is plain; `NotRequired` marks one a document may lack (set by a
later step). Times are ISO-8601 UTC strings (`*_at`) or epoch milliseconds (`*_ms`: what
the store filters and sorts on, see docs/store-notes.md). `_id`s are strings. Types only: nothing here runs."""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class HistoryEntry(TypedDict):
    """One step of a message's history: the status it reached, when, and why (`detail`)."""
    status: str
    at: str
    detail: NotRequired[str]


class OutboxCarrier(TypedDict):
    """The fields of a document whose change carries its events to the outbox in the same
    write (mongo/outbox.py: PENDING, PENDING_AT, PENDING_TOKEN)."""
    outbox_pending: NotRequired[list[OutboxEvent]]   # the events not yet relayed
    outbox_pending_ms: NotRequired[int]              # when the newest pending event was written
    outbox_pending_token: NotRequired[str]           # the newest pending event's id


class AttachmentRef(TypedDict):
    """A file a message sends: its bytes are in `attachments` (StoredAttachment), by
    workspace and sha256 (pipelines/messages/attachments.py)."""
    filename: str
    content_type: str
    content_id: str | None               # set: inline, shown by the HTML as cid:<content_id>
    sha256: str
    size: int                            # bytes, decoded


class StoredAttachment(TypedDict):
    """`attachments`: one file's bytes, once per workspace and content (mongo/attachments.py)."""
    _id: str                             # <workspace id>:<sha256>
    workspace_id: str
    sha256: str
    size: int
    content: bytes
    created_at: str


class Message(TypedDict):
    """`messages`: one email to one or more recipients, transactional (`accept_email`) or a
    campaign's (`campaigns/fanout.campaign_message`). Its status moves only as the table of
    pipelines/messages/delivery_status.py says."""
    _id: str
    workspace_id: str
    key_id: str | None
    sandbox: bool                        # accepted by a sandbox key: rendered, never sent
    kind: str                            # "transactional" | "campaign" | "automation"
    to: list[str]                        # the To header's addresses
    cc: NotRequired[list[str]]           # the Cc header's (a transactional email's, when given)
    bcc: NotRequired[list[str]]          # in the envelope only (recipients.envelope: to + cc + bcc)
    subject: str
    html: str | None
    text: str | None
    template_id: str | None
    template_version: int | None         # the version rendered, pinned when accepted
    template_data_json: NotRequired[str]  # personalise.TEMPLATE_DATA_FIELD: compact JSON
    from_address: str
    from_name: str | None
    reply_to: str | list[str] | None     # one address or several
    signing_domain: str                  # the DKIM d= domain
    custom_domain: str | None            # the workspace's own verified domain, if sent from one
    track_opens: bool
    track_clicks: bool
    status: str                          # delivery_status.ALL
    queued_at: str | None
    attempts: int                        # SMTP attempts that ended in a transient failure
    batch_id: str | None
    campaign_id: str | None
    created_at: str
    updated_at: str
    history: list[HistoryEntry]
    stream: NotRequired[str]             # mail_streams: transactional or marketing
    footer: NotRequired[bool]            # the compliance footer is added
    contact_id: NotRequired[str]         # a campaign message's recipient
    # an automation's email step's (automations/runs.email_message)
    automation_id: NotRequired[str]
    run_id: NotRequired[str]
    preview_text: NotRequired[str | None]
    suppressed_recipients: NotRequired[list[str]]
    # settled by the SMTP attempts so far: never sent to again (messages/outcomes.py)
    accepted_recipients: NotRequired[list[str]]
    refused_recipients: NotRequired[list[str]]
    # what the sender added (a transactional email's): its own headers as [name, value]
    # pairs (pipelines/messages/custom_headers.py), its files (their bytes apart), its
    # labels (pipelines/messages/labels.py)
    headers: NotRequired[list[list[str]]]
    attachments: NotRequired[list[AttachmentRef]]
    metadata: NotRequired[dict[str, str]]
    metadata_pairs: NotRequired[list[str]]  # "key=value", one a pair: what GET /email filters by
    tags: NotRequired[list[str]]
    due_at: NotRequired[str | None]      # a scheduled message's send time
    # the claim of the job that holds it ("" = nobody) and until when (lease_ms: its integer twin)
    lease_token: NotRequired[str]
    lease_until: NotRequired[str]
    lease_ms: NotRequired[int]
    due_ms: NotRequired[int]             # when the scheduler must act unasked (delivery_status.watch)
    stall_ms: NotRequired[int]           # when a queued message was last touched
    next_attempt_at: NotRequired[str | None]  # a retry waiting in the store
    deferred_since: NotRequired[str]     # the first transient failure (the retry lifetime runs from it)
    revivals: NotRequired[int]           # times the watchdog took it back from a dead claim
    last_error: NotRequired[str | None]
    error: NotRequired[str | None]
    smtp_response: NotRequired[str | None]
    sent_at: NotRequired[str]
    delivered_at: NotRequired[str]
    opened_at: NotRequired[str]
    clicked_at: NotRequired[str]
    bounced_at: NotRequired[str]
    failed_at: NotRequired[str]
    suppressed_at: NotRequired[str]
    cancelled_at: NotRequired[str]


class Batch(TypedDict):
    """`batches`: the messages of one POST /email/batch and their flat counters
    (mongo/batches.py)."""
    _id: str
    workspace_id: str
    key_id: str | None
    message_ids: NotRequired[list[str]]  # left out of the reads (mongo/batches.get)
    total: int
    pending: int                         # not final yet
    sent: int                            # accepted by the receiving server
    delivered: int
    bounced: int
    failed: int
    suppressed: int
    cancelled: int
    finished: int                        # the sum of the final outcomes
    created_at: str
    completed_at: str                    # "" until `finished` reaches `total`
    last_finished_at: NotRequired[str]


class CampaignSender(TypedDict):
    from_address: str
    from_name: str | None
    reply_to: str | None
    signing_domain: str
    custom_domain: str | None


class EngagementCounters(TypedDict):
    """Engagement counters kept on the campaign document (flat fields, bumped with $inc;
    campaigns/stats.py)."""
    opened_unique: int
    opens_total: int
    clicked_unique: int
    clicks_total: int
    unsubscribed: int
    complained: int


class Campaign(EngagementCounters):
    """`campaigns`: a draft (manage_campaigns.create), then started (start_campaign) and fanned
    out in batches of parts (fan_out_campaign); its engagement counters as EngagementCounters."""
    _id: str
    workspace_id: str
    key_id: str | None
    sandbox: bool
    name: str
    subject: str
    template_id: str
    list_id: str | None
    segment_id: str | None
    from_email: str | None
    from_name: str | None
    reply_to: str | None
    track_opens: bool
    track_clicks: bool
    status: str                          # draft, scheduled, sending, paused, sent, cancelled, failed
    send_at: str | None
    created_at: str
    created_ms: int                      # its integer twin: the console's list ranges over it
    updated_at: str
    total_recipients: int
    batches_queued: int                  # fan-out batches to make (campaign_fanout.batch_count)
    batches_done: int
    messages_created: int
    fanout_done: bool
    status_counts: dict[str, int]        # messages per status, a snapshot (campaigns/stats.py)
    stats_at: str | None
    # set when it starts
    audience: NotRequired[dict[str, Any]]  # {_id, conditions, is_list}: the list or segment, as started
    audience_at: NotRequired[str]
    audience_resolved: NotRequired[bool]
    recipients_token: NotRequired[str | None]
    sender: NotRequired[CampaignSender]
    template_version: NotRequired[int]
    started_at: NotRequired[str]
    fanout_at: NotRequired[str]
    revived_at: NotRequired[str]
    completed_at: NotRequired[str]
    cancelled_at: NotRequired[str]
    failure_reason: NotRequired[str | None]
    send_at_ms: NotRequired[int]
    updated_ms: NotRequired[int]
    # a cancelled campaign's unsent recipients, given back to the plan once (mongo/campaigns.take_refund)
    refund_due: NotRequired[bool]
    refund_due_ms: NotRequired[int]      # NEVER_MS once refunded: the scheduler's index
    plan_refunded: NotRequired[int]
    refunded_at: NotRequired[str]
    # pause and resume (pipelines/workflows/pause_campaign.py)
    paused_at: NotRequired[str]
    resumed_at: NotRequired[str]
    release_due_ms: NotRequired[int]     # a resume's or cancel's release of held parts, to repeat; NEVER_MS done


class CampaignPart(TypedDict):
    """`campaign_parts`: up to campaign_fanout.PART_SIZE recipients of a campaign, stored
    claimed by the render job that makes their messages (mongo/campaign_parts.py)."""
    _id: str                             # <campaign id>:<batch>:<number>
    campaign_id: str
    workspace_id: str
    contact_ids: list[str]
    done: bool
    lease_token: str
    lease_until: str
    due_ms: int                          # the lease's end: then the scheduler hands it on again
    created_at: str
    revivals: NotRequired[int]           # handed to a new job after its job was lost
    held: NotRequired[bool]              # held by its campaign's pause: no job until the resume
    held_at: NotRequired[str]


class Contact(OutboxCarrier):
    """`contacts` (mongo/contacts.new_document). Deleted contacts are kept a while, marked."""
    _id: str
    workspace_id: str
    email: str
    email_key: str                       # the address lower-cased: the unique key in a workspace
    first_name: str | None
    last_name: str | None
    attributes: dict[str, Any]
    subscribed: bool
    bounced: bool
    tags: list[str]                      # tag ids
    lists: list[str]                     # list ids
    deleted: bool
    deleted_at: str | None
    deletion_id: str                     # the bulk deletion that removed it ("" none), for undo
    created_at: str
    updated_at: str
    unsubscribed_at: str | None
    created_ms: int
    version: int                         # mongo/versions.FIELD: bumped by every write


class Template(TypedDict):
    """`templates`: the current version of a template (mongo/templates.py)."""
    _id: str
    workspace_id: str
    name: str | None
    description: str | None
    html: str | None
    json_structure: dict[str, Any] | None
    version: int
    deleted: bool
    deleted_at: str | None
    created_at: str
    updated_at: str


class TemplateVersion(TypedDict):
    """`template_versions`: every version a template had, `_id` <template id>:<version>."""
    _id: str
    template_id: str
    workspace_id: str
    version: int
    name: str | None
    description: str | None
    html: str | None
    json_structure: dict[str, Any] | None
    restored_from: int | None            # the version a restore copied
    created_at: str


class WebhookSubscription(TypedDict):
    """`webhooks` (mongo/webhooks.create)."""
    _id: str
    workspace_id: str
    events: list[str]
    target_url: str
    secret_sealed: str                   # the signing secret, encrypted (core/secret_box.py)
    form: str                            # which of the spec's two request forms created it
    active: bool
    created_at: str
    updated_at: str
    secret_rotated_at: str
    deleted_at: NotRequired[str]


class WebhookDelivery(TypedDict):
    """`webhook_deliveries`: one event to one subscription, `_id` <event id>:<subscription id>
    (webhooks/events.plan_deliveries); waits in its subscription's lane."""
    _id: str
    workspace_id: str
    webhook_id: str
    event_id: str
    event: str
    body: str                            # the payload as signed and sent, serialised once
    status: str                          # pending, delivered, failed, cancelled
    attempt_count: int
    next_attempt_at: str                 # for people (the delivery log); the store reads due_ms
    due_ms: int
    lane_due: str                        # <subscription id>~<due ms>: orders a lane (events.lane_due)
    locked_by: str
    last_status_code: int
    last_error: str | None
    created_at: str
    updated_at: str
    delivered_at: NotRequired[str]
    failed_at: NotRequired[str]          # when the last attempt gave up (webhooks/delivery.outcome_of)
    failed_ms: NotRequired[int]          # its integer twin: the console's recent failures range over it
    version: NotRequired[int]            # mongo/versions.FIELD: bumped by every write
    # an operator's replay (mongo/webhooks.reopen_failed): attempts count from 0 again
    replays: NotRequired[int]
    replayed_at: NotRequired[str]


class WebhookLane(TypedDict):
    """`webhook_lanes`: one a subscription, `_id` its id (mongo/webhooks.py)."""
    _id: str
    workspace_id: NotRequired[str]
    busy_ms: NotRequired[int]            # until when a turn in flight is presumed alive
    token: NotRequired[str]              # that turn's job
    wake_ms: NotRequired[int]            # when the lane next needs a turn
    rev: NotRequired[int]                # notes of new work, so a turn ending misses none


class AutomationStep(TypedDict):
    id: str
    step_type: str
    config: dict[str, Any]


class Automation(TypedDict):
    """`automations` (mongo/automations.new_document)."""
    _id: str
    workspace_id: str
    name: str
    status: str                          # draft, active, paused
    trigger_type: str
    trigger_config: dict[str, Any]
    steps: list[AutomationStep]
    version: int
    deleted: bool
    deleted_at: str | None
    key_id: str
    sandbox: bool
    created_at: str
    updated_at: str
    activated_at: str | None


class AutomationRun(OutboxCarrier):
    """`automation_runs`: one contact's way through an automation (automations/runs.new_run)."""
    _id: str
    workspace_id: str
    automation_id: str
    contact_id: str
    contact_email: str
    status: str                          # active, paused, completed, failed, cancelled
    step_id: str                         # the current step ("" none)
    phase: str                           # ready, waiting, calling ("" ended)
    version: int
    seq: int                             # stamps history entries: two visits of a step are two
    wake_ms: int
    resume_ms: int                       # a paused run's wake time, kept for its resume
    wait_event: str                      # the event a wait step waits for ("" none)
    wait_since: str
    attempts: int
    hops: int                            # runs started by move_to_flow before it, against loops
    history: list[dict[str, Any]]        # automations/runs.entry
    passed_steps: list[str]
    trigger: dict[str, Any]              # {type, data}: what started it
    error: str | None
    created_at: str
    updated_at: str
    ended_at: str | None


class Workspace(TypedDict):
    """`workspaces` (mongo/workspaces.create)."""
    _id: str
    name: str
    default_from_email: str | None
    settings: dict[str, Any]             # company_name / company_address feed the merge tags
    monthly_email_limit: int | None      # None: the POSTROOM_PLAN_MONTHLY_EMAIL_LIMIT default
    created_at: str
    sending_local_part: NotRequired[str]  # its address on the shared domain (ops/cli.py sets it at creation)


class ApiKey(TypedDict):
    """`api_keys`: only the key's hash is kept (mongo/api_keys.create)."""
    _id: str
    workspace_id: str
    name: str
    hash: str
    prefix: str                          # the key's first characters, to recognise it
    type: str                            # live | sandbox
    permissions: list[str]
    rate_limit: int | None               # requests a minute; None: the setting's default
    email_rate_limit: int | None
    revoked: bool
    created_at: str
    revoked_at: NotRequired[str]


class Suppression(TypedDict):
    """`suppressions`, `_id` <workspace id>:<address's match key> (mongo/suppressions.document)."""
    _id: str
    workspace_id: str
    email: str
    email_key: str
    reason: str
    source: str                          # api, bounce, complaint, unsubscribe, ...
    detail: str
    created_at: str
    created_ms: int                      # its integer twin: the console's list ranges over it


class BounceRecord(TypedDict):
    """`bounces` (bounces/effects.bounce_document): one recipient's bounce or complaint.
    What the report did not say is "" (the API shows null), as parsing.Bounce holds it."""
    _id: str
    workspace_id: str
    message_id: str                      # "" when no message of ours was found
    email: str
    email_key: str
    kind: str                            # bounce | complaint
    type: str                            # permanent, transient, undetermined
    category: str                        # parsing.classify.CATEGORIES; "" for a complaint
    reason: str                          # pipelines/bounces/parsing/reasons.py; "" for a complaint
    smtp_status: str
    diagnostic_code: str
    isp_name: str
    source: str                          # smtp (refused when sent), dsn, arf
    action: str                          # failed | delayed; "" for a complaint
    reporting_mta: str
    feedback_type: str                   # ARF's; "" for a bounce
    origin: str                          # what reported it (a report's id, or the message's)
    created_at: str
    created_ms: int                      # created_at as epoch ms: what a time window ranges over


class OutboxEvent(TypedDict):
    """`outbox`: an event as webhooks and automations read it (mongo/outbox.event_document)."""
    _id: str
    workspace_id: str
    event: str                           # its type, e.g. email.delivered
    data: dict[str, Any]
    timestamp: str
    dispatched: bool                     # handed to the webhook dispatch
    automations_pending: bool            # automations still have to read it
    dispatch_ms: NotRequired[int]
    automations_ms: NotRequired[int]
    dispatched_at: NotRequired[str]      # set by mongo/outbox.mark_dispatched



# Inbound mail (issue 36): what pipelines/inbound/parsing.py and
# pipelines/inbound/authentication.py hand on — JSON-ready, stored as they are.

class InboundAddress(TypedDict):
    address: str                         # as written (the local part's case kept), never empty
    name: str | None                     # the display name, decoded; None when there is none


class InboundAttachment(TypedDict):
    """One file of a received message: never expanded (an archive is described, not opened)."""
    filename: str                        # decoded, without any path; a made-up name when none was given
    content_type: str                    # lower-cased, e.g. image/png
    size: int                            # bytes, decoded
    content_id: str | None               # without <>: the HTML shows it as cid:<content_id>
    disposition: str                     # attachment | inline
    content_b64: NotRequired[str]        # the bytes, base64: only when size <= max_attachment_inline_bytes
    sha256: str                          # hex, of the decoded bytes


# `from` is a Python keyword: the functional form
ParsedInbound = TypedDict("ParsedInbound", {
    "from": InboundAddress | None,       # None when the From header is missing or holds no address
    "to": list[InboundAddress],
    "cc": list[InboundAddress],
    "reply_to": list[InboundAddress],
    "subject": str,                      # "" when missing
    "date": str | None,                  # ISO-8601 with its offset; None when missing or unreadable
    "message_id": str | None,            # with its <>
    "in_reply_to": str | None,
    "references": list[str],             # message ids with their <>, oldest first
    "text": str | None,                  # the text/plain body (inline text parts joined)
    "html": str | None,                  # the first text/html body, as sent
    "html_sanitised": str | None,        # html made safe to show (nh3: no script, handlers, forms)
    "reply": str | None,                 # the new text: without the quoted thread and signature
    "headers": list[list[str]],          # every top-level header as [name, value], decoded, in order
    "attachments": list[InboundAttachment],
    "auto_submitted": bool,              # an automatic message: never answer it automatically
    "problems": list[str],               # what was malformed, in words (MIME defects, charsets)
})


class SpfResult(TypedDict):
    result: str                          # pass fail softfail neutral none temperror permerror
    domain: str                          # the MAIL FROM's domain (the HELO name's for a null sender)


class DkimResult(TypedDict):
    result: str                          # pass fail neutral temperror permerror (none: no signature, no entry)
    domain: str                          # d=
    selector: str                        # s=


class DmarcResult(TypedDict):
    result: str                          # pass fail none temperror permerror
    policy: str | None                   # p= (sp= for a subdomain) of the record found: none quarantine reject
    domain: str                          # the From header's domain
    aligned_spf: bool
    aligned_dkim: bool


class AuthenticationResults(TypedDict):
    spf: SpfResult
    dkim: list[DkimResult]
    dmarc: DmarcResult
    summary: str                         # the Authentication-Results resinfo: "spf=pass smtp.mailfrom=…; …"
