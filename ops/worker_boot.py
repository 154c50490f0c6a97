"""The worker's composition root, imported by each worker process (ops/worker_process.py)."""

from actors import broker as _broker_setup
from pipelines.core.settings import Settings

settings = Settings.from_env()
broker = _broker_setup.setup(settings)
if settings.worker_metrics_port:  # `postroom worker` set dramatiq_prom_* for it
    from dramatiq.middleware.prometheus import Prometheus
    broker.add_middleware(Prometheus())
