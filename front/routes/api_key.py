from quart import Blueprint

from ..responses import one
from ..runtime import caller, settings

bp = Blueprint("api_key", __name__, url_prefix="/api/v1")


@bp.get("/api-key/permissions")
async def permissions():
    """Introspects the calling key."""
    key = caller().key
    return one({
        "id": key["_id"],
        "name": key["name"],
        "type": key["type"],
        "permissions": key.get("permissions") or [],
        "rate_limit": key.get("rate_limit") or settings().rate_limit_per_minute,
        "email_rate_limit": key.get("email_rate_limit") or settings().email_rate_limit_per_minute,
        "is_sandbox": key["type"] == "sandbox",
        "workspace_id": key["workspace_id"],
        "created_at": key["created_at"],
    })
