"""Sending domains, DKIM and DNS verification."""

from quart import Blueprint

bp = Blueprint("domains", __name__, url_prefix="/api/v1")
