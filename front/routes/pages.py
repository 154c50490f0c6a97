"""Recipient-facing pages with no API key: open pixel, click redirect, unsubscribe, preferences."""

from quart import Blueprint

bp = Blueprint("pages", __name__)
