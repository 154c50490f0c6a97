import asyncio

from quart import Blueprint

from mongo.client import ping

from ..errors import UNAVAILABLE_RETRY_AFTER_SECONDS
from ..runtime import db

bp = Blueprint("health", __name__, url_prefix="/api/v1")
BROKER_CHECK_SECONDS = 2.0


def _broker_reachable() -> bool:
    import dramatiq
    from dramatiq.brokers.rabbitmq import RabbitmqBroker
    broker = dramatiq.get_broker()
    if not isinstance(broker, RabbitmqBroker):
        return True  # in-process broker
    try:  # (`connection` connects on first use, so even reading it may fail)
        broker.connection.process_data_events(0)
        return True
    except Exception:  # any failure means unreachable to a health check
        return False


async def _broker_answers() -> bool:
    # pika may wait its socket timeout (10 s) on a broker that drops packets: answer sooner.
    try:
        return await asyncio.wait_for(asyncio.to_thread(_broker_reachable), BROKER_CHECK_SECONDS)
    except asyncio.TimeoutError:
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
