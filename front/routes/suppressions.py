"""The suppression list."""

from quart import Blueprint

bp = Blueprint("suppressions", __name__, url_prefix="/api/v1")
