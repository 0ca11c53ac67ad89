"""Log lines and the request id that ties them together.

Every record leaves the one handler as a JSON object (python-json-logger) with ``time`` (ISO-8601,
UTC), ``level``, ``logger``, ``message``, ``request_id`` and whatever ``extra`` the call passed;
or, when a person runs the process (stderr is a terminal) or LOG_FORMAT=text, as one plain line
``time level logger [request_id] message``. LOG_LEVEL sets the root level (default WARNING).

The request id: ``RequestIdMiddleware`` takes the client's or the proxy's ``X-Request-ID`` (when
it is a short token of safe characters) or makes one, keeps it in a contextvar for the request,
sends it back in the response's ``X-Request-ID`` and logs one access line at INFO. A Celery task
published while it is set carries it in a message header (``before_task_publish``) and the worker
sets it again for the task's run (``task_prerun``), so a task a request started, and the tasks
that task starts, log the request's id. Outside both it is ``-``.

``warn_sparsely``: a WARNING about a condition every request or batch meets while a store is out
(a refused write, a repair put off, a read served by the replica), at most once per 10 s per
process and kind, not once per request.
"""

from __future__ import annotations

import logging
import re
import sys
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.http import HttpRequest, HttpResponse
from pythonjsonlogger.json import JsonFormatter

HEADER = "X-Request-ID"
CELERY_HEADER = "missive_request_id"
ATTRIBUTE = "missive_request_id"  # the id, on the HttpRequest
NONE = "-"
# Taken from the client as is only when it cannot forge a log line or bloat one.
VALID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
FORMATS = ("json", "text")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"

request_id: ContextVar[str | None] = ContextVar("request_id", default=None)
access_log = logging.getLogger("missive.request")
SPARSE_EVERY_S = 10.0
_sparse_last: dict[tuple[str, str], float] = {}


def warn_sparsely(logger: logging.Logger, kind: str, msg: str, *args: Any) -> None:
    """``logger.warning(msg, *args)``, unless this logger logged ``kind`` in the last
    SPARSE_EVERY_S seconds (module docstring)."""
    now, key = time.monotonic(), (logger.name, kind)
    if now - _sparse_last.get(key, -SPARSE_EVERY_S) < SPARSE_EVERY_S:
        return
    _sparse_last[key] = now
    logger.warning(msg, *args)


class RequestIdFilter(logging.Filter):
    """Puts the current request id on every record the handler writes. Django logs a 4xx or 5xx
    answer (``django.request``) after the middlewares have returned, with the request on the
    record: its id is then the one the middleware kept on the request."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        record.request_id = request_id.get() or getattr(request, ATTRIBUTE, None) or NONE
        return True


def json_formatter() -> logging.Formatter:
    return JsonFormatter(
        "%(levelname)s %(name)s %(message)s %(request_id)s",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",
    )


def default_format(stream: Any = None) -> str:
    """Plain text for a person at a terminal, JSON lines for a log collector."""
    stream = stream or sys.stderr
    return "text" if stream.isatty() else "json"


def logging_config(fmt: str, level: str) -> dict[str, Any]:
    """The LOGGING setting: one stderr handler in ``fmt`` at root ``level``."""
    if fmt not in FORMATS:
        raise ValueError(f"LOG_FORMAT must be json or text, not {fmt!r}")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "filters": {"request_id": {"()": RequestIdFilter}},
        "formatters": {
            "json": {"()": json_formatter},
            "text": {"format": TEXT_FORMAT},
        },
        "handlers": {
            "console": {
                "class": "logging.StreamHandler",
                "formatter": fmt,
                "filters": ["request_id"],
            }
        },
        "root": {"handlers": ["console"], "level": level.upper()},
    }


def incoming_id(value: str | None) -> str:
    return value if value and VALID.fullmatch(value) else uuid.uuid4().hex


class RequestIdMiddleware:
    """Outermost middleware: the request id for everything the request logs or enqueues."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        rid = incoming_id(request.headers.get(HEADER))
        setattr(request, ATTRIBUTE, rid)  # for lines Django logs once this has returned
        token = request_id.set(rid)
        started = time.perf_counter()
        try:
            response = self.get_response(request)
            response[HEADER] = rid
            _log_access(request, response, started)
            return response
        finally:
            request_id.reset(token)


def _log_access(request: HttpRequest, response: HttpResponse, started: float) -> None:
    ms = round((time.perf_counter() - started) * 1000, 1)
    access_log.info(
        "%s %s %s %.1fms",
        request.method,
        request.path,
        response.status_code,
        ms,
        extra={"method": request.method, "path": request.path, "status": response.status_code},
    )


# -- Celery: the id travels in a message header (connected in InfraConfig.ready) --------------
def on_publish(headers: dict[str, Any] | None = None, **kwargs: Any) -> None:
    rid = request_id.get()
    if rid is not None and headers is not None:
        headers[CELERY_HEADER] = rid


def on_task_start(task: Any = None, **kwargs: Any) -> None:
    rid = getattr(task.request, CELERY_HEADER, None) if task is not None else None
    request_id.set(rid if isinstance(rid, str) else None)


def on_task_end(**kwargs: Any) -> None:
    request_id.set(None)  # a worker process runs task after task: none inherits another's id


def connect_celery_signals() -> None:
    from celery import signals

    signals.before_task_publish.connect(on_publish, weak=False)
    signals.task_prerun.connect(on_task_start, weak=False)
    signals.task_postrun.connect(on_task_end, weak=False)
