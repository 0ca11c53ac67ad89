"""The Celery app: three queues, routing by task name, JSON only, at-least-once with acks_late.

Queues: ``bulk.priority`` and ``bulk.daily`` (one per campaign channel, so a daily backlog never
delays a priority campaign) and ``messaging`` (write-behind, prewarm, housekeeping).
Start a worker per channel with ``celery -A config worker -Q bulk.priority``.
"""

from __future__ import annotations

import os

from celery import Celery, signals
from kombu import Exchange, Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

QUEUES = ("bulk.priority", "bulk.daily", "messaging")
# The hard time limit of every task; the broker's visibility timeout must outlive it, or a slow
# task would be handed to a second worker while the first still runs it.
TASK_TIME_LIMIT_S = 300
VISIBILITY_TIMEOUT_S = 3600

app = Celery("missive")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    # One exchange and routing key per queue: a queue declared without them would be bound to
    # the default exchange with the default key, and every message would land in all three.
    task_queues=[Queue(name, Exchange(name, type="direct"), routing_key=name) for name in QUEUES],
    task_default_exchange="messaging",
    task_default_routing_key="messaging",
    task_default_queue="messaging",
    task_routes={
        "bulk.priority.*": {"queue": "bulk.priority"},
        "bulk.daily.*": {"queue": "bulk.daily"},
        "bulk.*": {"queue": "messaging"},
        "messaging.*": {"queue": "messaging"},
        "unread.*": {"queue": "messaging"},
        "groups.*": {"queue": "messaging"},
    },
    task_serializer="json",
    result_serializer="json",
    accept_content=["json"],
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_time_limit=TASK_TIME_LIMIT_S,
    task_soft_time_limit=TASK_TIME_LIMIT_S - 30,
    broker_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S},
    result_backend_transport_options={"visibility_timeout": VISIBILITY_TIMEOUT_S},
    result_expires=3600,
    # Missive reads no task's result (the ledger, the stores are the truth). With results on,
    # Celery's Redis result backend subscribes to each sent task's result before sending it, and
    # retries that 20 times, a second apart, when the backend (the broker's Redis by default)
    # does not answer: a group send or a read that triggers a prewarm, in an API process, then
    # waited out the request's deadline (503) while the broker alone was down.
    task_ignore_result=True,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
    timezone="UTC",
)
# The periodic tasks are CELERY_BEAT_SCHEDULE in config/settings.py (one place, so none is lost).
app.autodiscover_tasks()


@app.on_after_configure.connect
def _broker_timeouts(sender: Celery, **kwargs: object) -> None:
    """The broker's row of STORE_TIMEOUTS (config/settings.py; read once Django's settings are,
    not at import): a frozen broker holds neither a worker nor an API request for longer
    (kombu's BRPOP waits 1 s, under the read timeout). An API process (PROCESS_ROLE ``api``)
    uses the ``api`` value and sends a task at most twice, the retry at once (a pooled
    connection a broker restart closed; a send that got no answer is not retried:
    infra/broker_transport.py): with Celery's default policy (3 retries) and the 5-s timeout,
    ``POST /campaigns`` with the broker frozen answered after more than 10 s."""
    from django.conf import settings

    row = settings.STORE_TIMEOUTS["broker"]
    timeout = row[settings.PROCESS_ROLE]
    sockets = {"socket_timeout": timeout, "socket_connect_timeout": row["connect"]}
    sender.conf.broker_transport_options = {**sender.conf.broker_transport_options, **sockets}
    sender.conf.redis_socket_timeout = timeout
    sender.conf.redis_socket_connect_timeout = row["connect"]
    sender.conf.broker_connection_timeout = row["connect"]
    if settings.PROCESS_ROLE == "api":
        sender.conf.task_publish_retry_policy = {"max_retries": 1, "interval_start": 0}


@app.on_after_configure.connect
def _start_embedded_redis(sender: Celery, **kwargs: object) -> None:
    from django.conf import settings

    from infra import embedded

    if settings.REDIS_EMBEDDED:
        embedded.ensure_started(settings.VAR_DIR)


@signals.worker_init.connect
def _worker_role(**kwargs: object) -> None:
    """A worker with an API process's role (a shared environment file, a test process that
    imported ``config.wsgi``) would wait the API's short timeouts and treat a broker that does not
    answer as a send to give up (infra/broker_transport.py): its consumer stopped at the first
    broker blip. It does not start."""
    from django.conf import settings

    from infra import embedded

    if settings.PROCESS_ROLE == "api":
        embedded.stop_if_started(settings.VAR_DIR)  # the one-machine mode's, if it started it
        raise SystemExit(
            "missive: MISSIVE_PROCESS_ROLE=api is for API processes; start Celery workers "
            "without it (or with MISSIVE_PROCESS_ROLE=worker)."
        )


@signals.worker_init.connect
def _warm(**kwargs: object) -> None:
    """Per-process work done once in a worker's main process, before it forks its pool."""
    from infra.heap import freeze_startup_heap
    from infra.redis import warm

    warm()
    freeze_startup_heap(urls=False)  # full GC passes skip the start-up heap (infra/heap.py)


# Connected with the app, not in an AppConfig.ready: a worker sets its logging up as it starts,
# and this must be in place whether or not Django's apps are ready by then.
@signals.setup_logging.connect
def _logging(loglevel: int | None = None, **kwargs: object) -> None:
    """Workers and beat log as every other process does (infra/logs.py: JSON lines with the
    request id, or text at a terminal), at LOG_LEVEL or the command's ``-l``, the more verbose;
    with this receiver connected Celery leaves the root logger alone."""
    import logging.config

    from django.conf import settings

    from infra import logs

    level = min(logging.getLevelName(settings.LOG_LEVEL.upper()), loglevel or logging.WARNING)
    logging.config.dictConfig(logs.logging_config(settings.LOG_FORMAT, logging.getLevelName(level)))
