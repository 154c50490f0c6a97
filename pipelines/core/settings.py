"""The one settings object. Built once per process by its composition root (the app
factory, the worker boot module, the ops command); nothing else reads the environment."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from pathlib import Path

# Inside a send claim's lease, after the SMTP transaction: the store writes that record it.
SEND_LEASE_MARGIN_SECONDS = 2.0
# Retention may not be shorter than a message can live unsent (the SMTP retry lifetime, 5 days).
MIN_RETENTION_DAYS = 7


def _flag(value: str | None) -> bool:
    return (value or "").strip().lower() in {"1", "true", "yes", "on"}


@dataclasses.dataclass(frozen=True)
class Settings:
    # Where things live. None means "use the embedded default".
    mongodb_url: str | None = None
    mongodb_database: str = "postroom"
    amqp_url: str | None = None
    smtp_url: str | None = None
    base_url: str = "http://127.0.0.1:8080"
    secret_key: str = ""
    shared_domain: str = "postroom.test"
    data_dir: Path = Path("var")
    dns_resolver: str | None = None
    allow_private_targets: bool = False
    # API limits; per-key values on the key document override the first two.
    rate_limit_per_minute: int = 100
    email_rate_limit_per_minute: int = 100
    idempotency_ttl_seconds: int = 3600
    # Public form submissions per minute from one client address to one form.
    form_submissions_per_minute: int = 10
    max_html_bytes: int = 256 * 1024
    max_request_bytes: int = 32 * 1024 * 1024
    # How long a client may take to send a request body, seconds (then 408 and the connection
    # is closed): a body trickled in slowly must not hold a connection for ever.
    request_body_timeout_seconds: float = 60.0
    # How long an API request waits for an unreachable store before answering 503.
    front_store_wait_seconds: float = 0.5
    # Delivery.
    smtp_connections: int = 4
    smtp_timeout_seconds: float = 30.0
    # The name we give in EHLO; None: the BASE_URL's host when it is a DNS name, else the
    # machine's FQDN when it is a public name, else the bounce domain (transport.ehlo_choice).
    smtp_helo_name: str | None = None
    # STARTTLS is used whenever the next hop offers it (implicit TLS for smtps://); its
    # certificate is verified against the system CAs plus this file, unless verify is off.
    smtp_tls_verify: bool = True
    smtp_tls_ca_file: str | None = None
    # Transient SMTP failures are retried on the table in pipelines/messages/retry_schedule.py
    # (waits multiplied by the scale; tests speed it up) for this long, seconds.
    send_retry_scale: float = 1.0
    send_retry_lifetime_seconds: int = 5 * 24 * 3600
    # A send job carries rendered MIME: at most this many bytes of it (a single larger
    # message travels alone), well under RabbitMQ's maximum message size (16 MiB in 4.x).
    send_job_max_bytes: int = 4 * 1024 * 1024
    bounce_domain: str = "bounces.postroom.test"
    inbound_host: str = "127.0.0.1"
    inbound_port: int = 2526
    # Inbound mail to workspaces (docs/inbound.md): the operator's inbound domain
    # (`<workspace token>+<tag>@…`, MX to the host running `postroom inbound`), the
    # largest message the port takes (announced as SIZE, bytes; bounce reports too),
    # messages a minute from one sending IP and from one MAIL FROM, and how many days a
    # received message (parsed and raw) is kept.
    inbound_domain: str = "inbound.postroom.test"
    inbound_max_message_bytes: int = 10 * 1024 * 1024
    inbound_messages_per_minute: int = 60
    inbound_retention_days: int = 30
    plan_monthly_email_limit: int = 0  # 0 = unlimited; per-workspace value overrides
    domain_rate_per_minute: int = 0  # 0 = unlimited; default per destination domain
    domain_concurrency: int = 0  # 0 = unlimited
    scheduler_interval_seconds: float = 1.0
    # Processes per worker process that render messages off its event loop (actors/render_pool.py);
    # 0 renders in a thread of the worker instead.
    render_processes: int = 2
    # Multiplies every webhook retry wait (pipelines/messages/retry_schedule.py); tests speed it up.
    webhook_retry_scale: float = 1.0
    # Attempts in flight at once to one webhook subscription's endpoint (its lane's turn).
    webhook_endpoint_concurrency: int = 8
    # How long a send claim holds a message before another worker may take it over (a
    # worker killed mid-send), and how long a message may sit `queued` untouched before
    # the scheduler's watchdog enqueues its render again (its job was lost).
    send_lease_seconds: int = 300
    message_stall_seconds: int = 600
    # How many times the watchdog hands one message back before it ends `failed`.
    message_max_revivals: int = 12
    # Retention (pipelines/workflows/message_retention.py), days after a message was created:
    # its bodies (html, text, template data, attachments) are dropped, then the message
    # with its timeline is deleted. At least MIN_RETENTION_DAYS each (a retry lives 5 days).
    message_body_retention_days: int = 30
    message_retention_days: int = 400
    # Prometheus scrape ports (0 = off): the front's, the scheduler's (both their own
    # process), and a worker pool's (Dramatiq's exposition server for all its processes).
    front_metrics_port: int = 0
    scheduler_metrics_port: int = 0
    worker_metrics_port: int = 0
    metrics_host: str = "127.0.0.1"
    # "text" (default) or "json": one JSON object per log record (ops/log_format.py).
    log_format: str = "text"

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if env is None else env

        def get(name: str) -> str | None:
            value = env.get(f"POSTROOM_{name}")
            return value if value not in (None, "") else None

        defaults = cls()
        values: dict = {}
        for field in dataclasses.fields(cls):
            raw = get(field.name.upper())
            if raw is None:
                continue
            current = getattr(defaults, field.name)
            if isinstance(current, bool):
                values[field.name] = _flag(raw)
            elif isinstance(current, int):
                values[field.name] = int(raw)
            elif isinstance(current, float):
                values[field.name] = float(raw)
            elif isinstance(current, Path):
                values[field.name] = Path(raw)
            else:
                values[field.name] = raw
        return cls(**values)

    def __post_init__(self):
        # A claim must outlast one whole SMTP transaction, or a worker could never send.
        if self.send_lease_seconds <= self.smtp_timeout_seconds + SEND_LEASE_MARGIN_SECONDS:
            raise ValueError(f"POSTROOM_SEND_LEASE_SECONDS ({self.send_lease_seconds}) must exceed "
                             f"POSTROOM_SMTP_TIMEOUT_SECONDS ({self.smtp_timeout_seconds:g}) by more than "
                             f"{SEND_LEASE_MARGIN_SECONDS:g} s.")
        for name in ("message_body_retention_days", "message_retention_days"):
            if getattr(self, name) < MIN_RETENTION_DAYS:
                raise ValueError(f"POSTROOM_{name.upper()} ({getattr(self, name)}) must be at least "
                                 f"{MIN_RETENTION_DAYS}: a message may still be retried that long.")
        if self.smtp_helo_name is not None:
            # local import: dns_records loads cryptography, which most settings users never need
            from pipelines.domains.dns_records import is_public_host_name
            if not is_public_host_name(self.smtp_helo_name):
                raise ValueError(f"POSTROOM_SMTP_HELO_NAME ({self.smtp_helo_name}) must be this host's public DNS "
                                 "name: receivers mark mail greeting as localhost or an address as spam.")

    def replace(self, **changes) -> Settings:
        return dataclasses.replace(self, **changes)
