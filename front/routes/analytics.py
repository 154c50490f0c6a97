"""Aggregate analytics from counters."""

from quart import Blueprint

bp = Blueprint("analytics", __name__, url_prefix="/api/v1")
