"""Contacts: CRUD, bulk delete, delete-all (soft) and restore, duplicates."""

from quart import Blueprint

bp = Blueprint("contacts", __name__, url_prefix="/api/v1")
