"""Project-level app: registers the start-up checks of the chosen storage backends, and the
stores' circuit breakers (config/breakers.py) on database connections and in /metrics."""

from django.apps import AppConfig


class ConfigConfig(AppConfig):
    name = "config"
    label = "missive_config"

    def ready(self) -> None:
        from config import breakers, checks  # noqa: F401  (registers the checks)
        from config.metrics import register_gauges
        from config.outages import report_refused_write
        from config.redis import on_refused_write

        on_refused_write(report_refused_write)  # OOM / MISCONF counted and logged (outages)

        # a circuit breaker per database connection, its state in /metrics (config/breakers.py)
        breakers.guard_new_connections()
        register_gauges(breakers.read_gauges)
        self._connect_observability()

    def _connect_observability(self) -> None:
        """Request ids into Celery tasks (config/logs.py); task metrics and build info
        (config/observe.py)."""
        from config import logs, observe
        from config.metrics import register_gauges

        logs.connect_celery_signals()
        observe.connect_celery_signals()
        register_gauges(observe.read_build_info)
