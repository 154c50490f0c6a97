"""Identifiers. Resources the spec calls UUIDs get UUID4 strings; messages and batches
get prefixed ids so a support engineer can tell them apart in a log line."""

import uuid


def new_uuid() -> str:
    return str(uuid.uuid4())


def new_message_id() -> str:
    return "msg_" + uuid.uuid4().hex


def new_batch_id() -> str:
    return "batch_" + uuid.uuid4().hex
