"""Module the `dramatiq` CLI imports in each worker process: the worker's composition root."""

from actors import broker as _broker_setup
from ops import log_format as _log_format
from pipelines.settings import Settings

settings = Settings.from_env()
_log_format.configure(settings.log_format)
broker = _broker_setup.setup(settings)
if settings.worker_metrics_port:  # `postroom worker` set dramatiq_prom_* for it
    from dramatiq.middleware.prometheus import Prometheus
    broker.add_middleware(Prometheus())
_broker_setup.load_actors()
