import asyncio

from quart import Blueprint

from actors.publish import broker_answers
from mongo.client import ping

from ..errors import UNAVAILABLE_RETRY_AFTER_SECONDS
from ..runtime import db

bp = Blueprint("health", __name__, url_prefix="/api/v1")
BROKER_CHECK_SECONDS = 2.0


async def _broker_answers() -> bool:
    # pika may wait its socket timeout (10 s) on a broker that drops packets: answer sooner.
    try:
        return await asyncio.wait_for(broker_answers(), BROKER_CHECK_SECONDS)
    except TimeoutError:
        return False


@bp.get("/health")
async def health():
    """API health check; needs no key. Reports store and broker reachability; both are
    asked at once, so a store outage answers within the front's store wait."""
    store_ok, broker_ok = await asyncio.gather(ping(db()), _broker_answers())
    ok = store_ok and broker_ok
    body = {"data": {"status": "ok" if ok else "degraded",
                     "store": "ok" if store_ok else "unreachable",
                     "broker": "ok" if broker_ok else "unreachable",
                     "version": "v1"}}
    if ok:
        return body, 200
    return body, 503, {"Retry-After": str(UNAVAILABLE_RETRY_AFTER_SECONDS)}
