"""Static and condition-based lists and their members."""

from quart import Blueprint

bp = Blueprint("lists", __name__, url_prefix="/api/v1")
