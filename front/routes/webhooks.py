"""Webhook subscriptions and test deliveries."""

from quart import Blueprint

bp = Blueprint("webhooks", __name__, url_prefix="/api/v1")
