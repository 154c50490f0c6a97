"""Identifiers. Resources the spec calls UUIDs get UUID4 strings; messages and batches
get prefixed ids so a support engineer can tell them apart in a log line."""

import hashlib
import uuid


def new_uuid() -> str:
    return str(uuid.uuid4())


def new_message_id() -> str:
    return "msg_" + uuid.uuid4().hex


def new_batch_id() -> str:
    return "batch_" + uuid.uuid4().hex


def message_id_for(seed: str, index: int) -> str:
    """The id of the `index`th message of a request named by `seed` (its Idempotency-Key
    claim): the same on every attempt of that request, unguessable without the seed."""
    return "msg_" + hashlib.sha256(f"{seed}:message:{index}".encode()).hexdigest()[:32]


def batch_id_for(seed: str) -> str:
    return "batch_" + hashlib.sha256(f"{seed}:batch".encode()).hexdigest()[:32]
