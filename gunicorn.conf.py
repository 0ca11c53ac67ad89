"""gunicorn's settings file, read by gunicorn from the directory it starts in: the project root,
where every command of docs/operations.md starts it.

gunicorn's own lines (the master starting, booting and stopping workers, signals) leave through
Missive's one log handler (infra/logs.py): JSON lines with ``time``, ``level``, ``logger`` and
``request_id`` under a supervisor, like every other line of the API, or plain lines at a
terminal (``LOG_FORMAT`` overrides either way). gunicorn's access log stays off: the request
middleware writes one access line per request, with its request id, at ``LOG_LEVEL=INFO``.
"""

import os

from infra.logs import default_format, logging_config

logconfig_dict = {
    **logging_config(os.environ.get("LOG_FORMAT") or default_format(), "WARNING"),
    "loggers": {
        # the master's lines; its handler is also each worker's: uvicorn's worker class copies
        # gunicorn.error's handlers onto ``uvicorn.error`` and stops it propagating, so without a
        # handler of its own here a worker's start and stop ("Application startup complete",
        # what a supervisor or a benchmark waits for) were lost
        "gunicorn.error": {"level": "INFO", "handlers": ["console"], "propagate": False},
        "gunicorn.access": {"level": "INFO", "propagate": False},
    },
}
