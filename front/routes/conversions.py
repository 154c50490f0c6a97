"""Conversion tracking."""

from quart import Blueprint

bp = Blueprint("conversions", __name__, url_prefix="/api/v1")
