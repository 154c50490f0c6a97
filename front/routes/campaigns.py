"""Campaigns: create, list, read, send, schedule, cancel."""

from quart import Blueprint

bp = Blueprint("campaigns", __name__, url_prefix="/api/v1")
