"""Compare-and-set on an integer version: a document read, changed in Python and written
back is guarded by the `version` it was read with, and every write to it adds one.

Never a timestamp: the embedded store's update and find filters compare strings that look
like ISO dates at whole-second precision (`{updated_at: "…56.807123Z"}` matches a stored
`…56.806123Z`, while count_documents does not), so two writes that read a document within
the same second both passed an `updated_at` guard and one of them was silently lost. An
integer compares exactly everywhere (tests/mongo/test_store_behaviour.py pins the quirk).
A document it guards is inserted with `version` 0 (contacts: mongo/contacts.new_document)."""

from __future__ import annotations

FIELD = "version"


def guard(doc: dict) -> dict:
    """The filter condition that holds only while nothing has written `doc` since it was read."""
    return {FIELD: doc[FIELD]}


def bump(update: dict) -> dict:
    """`update` (its operators) plus the version increment, in the same write."""
    out = {op: dict(fields) for op, fields in update.items()}
    out.setdefault("$inc", {})[FIELD] = 1
    return out
