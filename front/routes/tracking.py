"""Product-view tracking."""

from quart import Blueprint

bp = Blueprint("tracking", __name__, url_prefix="/api/v1")
