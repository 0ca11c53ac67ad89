"""Start-up checks: the configured inbox backend exists and its services answer.

Each failure is one Error whose message is one sentence naming the setting and the address, e.g.
``INBOX_BACKEND=hbase but no HBase Thrift server answers at 127.0.0.1:9090``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, register

from config import hbase
from config.redis import get_redis


@register("missive")
def check_inbox_backend(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    name = settings.INBOX_BACKEND
    if name not in settings.INBOX_BACKENDS:
        choices = ", ".join(sorted(settings.INBOX_BACKENDS))
        return [Error(f"INBOX_BACKEND={name} is not one of: {choices}.", id="missive.E001")]
    if name == "hbase":
        try:
            hbase.ping()
        except Exception:
            msg = f"INBOX_BACKEND=hbase but no HBase Thrift server answers at {hbase.address()}"
            return [Error(msg, id="missive.E002")]
    return []


@register("missive")
def check_redis(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        get_redis().ping()
    except Exception as exc:
        msg = f"REDIS_URL={settings.REDIS_URL} but Redis does not answer ({exc.__class__.__name__})"
        return [Error(msg, id="missive.E003")]
    return []
