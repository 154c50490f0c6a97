"""Tags and their assignment to contacts."""

from quart import Blueprint

bp = Blueprint("tags", __name__, url_prefix="/api/v1")
