"""Rule-based segments: estimate and matching contacts."""

from quart import Blueprint

bp = Blueprint("segments", __name__, url_prefix="/api/v1")
