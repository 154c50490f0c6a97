"""How rendered messages are cut into `send` jobs: each job bounded by count and by bytes.

The rendered MIME rides the broker inside the job (pipelines/workflows/send_chunk.py), so
a job of 100 messages of a 200 KB template would be a 30 MB AMQP message; RabbitMQ 4 refuses anything
over 16 MiB by default. Jobs are cut in order, closing one before the message that would
take it past `max_bytes` (its JSON size, as the broker will carry it). A single message
larger than the bound travels alone: the largest a send can make (the 256 KB HTML limit,
quoted-printable, with its text alternative) is about 2 MB, far under the broker's limit."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator

MAX_MESSAGES = 100


def job_bytes(rendered: dict) -> int:
    """What one rendered message adds to a job's body (Dramatiq encodes jobs as JSON).
    Encoding each MIME to JSON only to measure it cost a sixth of the worker's CPU, so an
    ASCII MIME (what we compose) with no control characters but CR, LF and tab is counted
    with a few C scans instead: its length, plus one for each character JSON writes as two
    (`"`, `\\`, CR, LF, tab). Anything else is encoded to be measured."""
    data = rendered.get("data")
    if not (isinstance(data, str) and data.isascii() and not _OTHER_CONTROL.search(data)):
        return len(json.dumps(rendered)) + 2
    rest = {k: v for k, v in rendered.items() if k != "data"}
    return len(json.dumps(rest)) + 2 + len(', "data": ""') + len(data) + sum(data.count(c) for c in _TWO_CHAR_ESCAPES)


_TWO_CHAR_ESCAPES = ('"', "\\", "\r", "\n", "\t")
_OTHER_CONTROL = re.compile("[\x00-\x08\x0b-\x0c\x0e-\x1f]")  # JSON writes these as six characters


def chunks(rendered: list[dict], *, max_bytes: int, max_messages: int = MAX_MESSAGES) -> Iterator[list[dict]]:
    chunk: list[dict] = []
    size = 0
    for item in rendered:
        item_size = job_bytes(item)
        if chunk and (size + item_size > max_bytes or len(chunk) >= max_messages):
            yield chunk
            chunk, size = [], 0
        chunk.append(item)
        size += item_size
    if chunk:
        yield chunk


def new_claim_token() -> str:
    """A send job's claim token: fixed when the job is published, so a retry of the same
    job takes its own claim back and a duplicate of it claims nothing."""
    return uuid.uuid4().hex
