"""The contact list's search and filters as a MongoDB filter.

Search is multi-word: the text is split on white space and every word must appear
(case-insensitively, anywhere) in the email, the first name or the last name — so
"ann smith" finds Ann Smith and also ann@smith.example. `subscribed` filters both ways;
`bounced` only narrows when true (the spec: false means "do not filter")."""

from __future__ import annotations

import re

SEARCH_FIELDS = ("email_key", "first_name", "last_name")
MAX_WORDS = 10


def search_filter(text: str | None, *, subscribed: bool | None = None,
                  bounced: bool | None = None) -> dict | None:
    conditions: list[dict] = []
    for word in (text or "").split()[:MAX_WORDS]:
        pattern = {"$regex": re.escape(word), "$options": "i"}
        conditions.append({"$or": [{field: pattern} for field in SEARCH_FIELDS]})
    if subscribed is not None:
        conditions.append({"subscribed": subscribed})
    if bounced:
        conditions.append({"bounced": True})
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"$and": conditions}
