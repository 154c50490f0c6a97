"""Messages: search (the filters of GET /email) and one message's timeline (GET /email/:id)."""

from __future__ import annotations

from urllib.parse import urlencode

from pipelines.messages import delivery_status, timeline

from ..routes.email import EmailQuery, find_messages, message_detail
from ..runtime import caller
from . import bp
from .forms import PAGE_ROWS, filters, shown_filters
from .guard import page, render

FILTERS = ("to", "status", "campaign_id", "tag", "since", "until")


@page(bp, "/messages", area="email")
async def messages():
    params = filters(EmailQuery, limit=str(PAGE_ROWS))
    found, next_cursor = await find_messages(caller().workspace_id, params)
    given = shown_filters(*FILTERS)
    return await render("messages.html", title="Messages", rows=[timeline.list_item(d) for d in found.items],
                        total=found.total, exact=found.exact, given=given, statuses=sorted(delivery_status.ALL),
                        next_page=f"?{urlencode({**given, 'cursor': next_cursor})}" if next_cursor else None)


@page(bp, "/messages/<message:message_id>", area="email")
async def message(message_id: str):
    shown = await message_detail(message_id)
    return await render("message.html", title=f"Message {shown['id']}", message=shown)
