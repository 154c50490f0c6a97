"""Webhooks: the deliveries that failed for good, latest first, each with its
subscription and last answer, and a replay button (as `postroom webhooks replay`)."""

from __future__ import annotations

from urllib.parse import urlencode

from quart import redirect, request

from mongo import webhooks as webhook_store
from pipelines.workflows import manage_webhooks

from ..lookup import found
from ..runtime import caller, db
from . import bp
from .guard import page, render

RECENT_FAILURES = 50


@page(bp, "/webhooks", area="webhooks")
async def webhooks():
    workspace_id = caller().workspace_id
    failures = await webhook_store.recent_failures(db(), workspace_id, RECENT_FAILURES)
    subscriptions = {}
    for webhook_id in dict.fromkeys(f["webhook_id"] for f in failures):  # a few, each by its _id
        subscriptions[webhook_id] = await webhook_store.get(db(), workspace_id, webhook_id)
    return await render("webhooks.html", title="Webhooks", failures=failures, subscriptions=subscriptions,
                        replayed=request.args.get("replayed"))


@page(bp, "/webhooks/deliveries/<delivery_id>/replay", area="webhooks", methods=("POST",))
async def replay(delivery_id: str):
    await found(manage_webhooks.replay_failed(db(), caller().workspace_id, delivery_id),
                "No such webhook delivery in this workspace.")
    return redirect(f"/console/webhooks?{urlencode({'replayed': delivery_id})}", 303)
