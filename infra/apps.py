"""The platform floor's app: registers the start-up checks of the chosen storage backends, and the
stores' circuit breakers (infra/breakers.py) on database connections and in /metrics."""

from django.apps import AppConfig


class InfraConfig(AppConfig):
    name = "infra"

    def ready(self) -> None:
        from infra import breakers, checks, statements  # noqa: F401  (registers the checks)
        from infra.metrics import register_gauges
        from infra.outages import report_refused_write
        from infra.redis import on_refused_write

        on_refused_write(report_refused_write)  # OOM / MISCONF counted and logged (outages)

        # a circuit breaker per database connection, its state in /metrics (infra/breakers.py)
        breakers.guard_new_connections()
        statements.mark_every_connection()  # the binlog tells the application's rows apart
        register_gauges(breakers.read_gauges)
        self._connect_observability()

    def _connect_observability(self) -> None:
        """Request ids into Celery tasks (infra/logs.py); task metrics and build info
        (infra/observe.py)."""
        from infra import logs, observe
        from infra.metrics import register_gauges

        logs.connect_celery_signals()
        observe.connect_celery_signals()
        register_gauges(observe.read_build_info)
