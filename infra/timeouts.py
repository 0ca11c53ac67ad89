"""Every store client's timeouts, read from settings.STORE_TIMEOUTS (the table's comment there).

``connect_s(store)`` is the connect timeout, ``read_s(store)`` the read (and write) timeout of
this process: the ``api`` value in an API server process (config/asgi.py and config/wsgi.py set
MISSIVE_PROCESS_ROLE=api), the ``worker`` value everywhere else. The clients read them when they
are made: infra/redis.py, infra/broker.py, config/celery.py, infra/hbase.py (through
settings.HBASE) and the MariaDB OPTIONS in config/settings.py.
"""

from __future__ import annotations

from django.conf import settings


def connect_s(store: str) -> float:
    return float(settings.STORE_TIMEOUTS[store]["connect"])


def read_s(store: str) -> float:
    return float(settings.STORE_TIMEOUTS[store][settings.PROCESS_ROLE])
