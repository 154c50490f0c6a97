"""Bounce records."""

from quart import Blueprint

bp = Blueprint("bounces", __name__, url_prefix="/api/v1")
