"""Versioned templates and json_structure rendering."""

from quart import Blueprint

bp = Blueprint("templates", __name__, url_prefix="/api/v1")
