"""A campaign's statistics and rates, from what the store keeps.

Two sources, each exact in its own way:
- `status_counts`: how many of the campaign's messages are in each delivery status,
  counted from the messages themselves (a snapshot refreshed while the campaign is live);
- engagement counters kept on the campaign document as they happen (`$inc` by `_id`):
  unique and total opens and clicks, unsubscribes, complaints.

A message's status only moves forward (queued → … → delivered → opened → clicked), so
`delivered` counts every message that got at least that far. Rates are fractions in
[0, 1], rounded to 4 places, and 0 when their denominator is 0:

    delivery_rate    = delivered / sent
    bounce_rate      = bounced / sent
    open_rate        = opened (unique) / delivered
    click_rate       = clicked (unique) / delivered
    click_to_open_rate = clicked (unique) / opened (unique)
    unsubscribe_rate = unsubscribed / delivered
    complaint_rate   = complained / delivered
"""

from __future__ import annotations

from pipelines.core.documents import Campaign, EngagementCounters

# Statuses a message passes through after SMTP was attempted and answered.
SENT_STATUSES = ("sent", "delivered", "opened", "clicked", "bounced")
DELIVERED_STATUSES = ("delivered", "opened", "clicked")
PENDING_STATUSES = ("queued", "sending")


# A new campaign's counters.
ZERO_COUNTERS: EngagementCounters = {"opened_unique": 0, "opens_total": 0, "clicked_unique": 0, "clicks_total": 0,
                                     "unsubscribed": 0, "complained": 0}
COUNTERS = tuple(ZERO_COUNTERS)

RATE_DIGITS = 4


def _total(counts: dict[str, int], statuses: tuple[str, ...]) -> int:
    return sum(int(counts.get(s, 0)) for s in statuses)


def ratio(part: int, whole: int) -> float:
    return round(part / whole, RATE_DIGITS) if whole else 0.0


def stats(campaign: Campaign) -> dict:
    counts = campaign.get("status_counts") or {}
    return {
        "recipients": int(campaign.get("total_recipients", 0)),
        "sent": _total(counts, SENT_STATUSES),
        "delivered": _total(counts, DELIVERED_STATUSES),
        "opened": int(campaign.get("opened_unique", 0)),
        "opens_total": int(campaign.get("opens_total", 0)),
        "clicked": int(campaign.get("clicked_unique", 0)),
        "clicks_total": int(campaign.get("clicks_total", 0)),
        "bounced": int(counts.get("bounced", 0)),
        "complained": int(campaign.get("complained", 0)),
        "unsubscribed": int(campaign.get("unsubscribed", 0)),
        "failed": int(counts.get("failed", 0)),
        "suppressed": int(counts.get("suppressed", 0)),
        "cancelled": int(counts.get("cancelled", 0)),
        "pending": pending(campaign, counts),
    }


def pending(campaign: Campaign, counts: dict[str, int]) -> int:
    """Queued or on the wire: the messages in those statuses, and the recipients handed
    on to sending whose message is not recorded yet (a campaign part records each one at
    its outcome: mongo/campaign_parts.py)."""
    unrecorded = int(campaign.get("messages_created") or 0) - sum(int(n) for n in counts.values())
    return _total(counts, PENDING_STATUSES) + max(0, unrecorded)


def rates(s: dict) -> dict:
    return {
        "delivery_rate": ratio(s["delivered"], s["sent"]),
        "bounce_rate": ratio(s["bounced"], s["sent"]),
        "open_rate": ratio(s["opened"], s["delivered"]),
        "click_rate": ratio(s["clicked"], s["delivered"]),
        "click_to_open_rate": ratio(s["clicked"], s["opened"]),
        "unsubscribe_rate": ratio(s["unsubscribed"], s["delivered"]),
        "complaint_rate": ratio(s["complained"], s["delivered"]),
    }
