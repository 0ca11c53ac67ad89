"""Start-up checks: the configured inbox and group-timeline backends exist, and every store the
settings name answers (the primary database, the Celery broker, Redis, HBase when a backend lives
there); a replica that does not answer is a warning only: its reads go to the primary.

Each failure is one Error whose message is one sentence naming the setting and the address, e.g.
``INBOX_BACKEND=hbase but no HBase Thrift server answers at 127.0.0.1:9090``.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Error, Warning, register
from django.core.exceptions import ImproperlyConfigured
from redis.connection import parse_url

from infra import hbase, health
from infra.redis import clustered, get_redis, get_redis_nodes, primaries


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
def check_group_timeline_backend(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    name = settings.GROUP_TIMELINE_BACKEND
    if name not in settings.GROUP_TIMELINE_BACKENDS:
        choices = ", ".join(sorted(settings.GROUP_TIMELINE_BACKENDS))
        msg = f"GROUP_TIMELINE_BACKEND={name} is not one of: {choices}."
        return [Error(msg, id="missive.E010")]
    if name == "hbase" and settings.INBOX_BACKEND != "hbase":  # else checked just above
        try:
            hbase.ping()
        except Exception:
            msg = (
                "GROUP_TIMELINE_BACKEND=hbase but no HBase Thrift server answers at "
                f"{hbase.address()}"
            )
            return [Error(msg, id="missive.E011")]
    return []


@register("missive")
def check_redis(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    try:
        get_redis().ping()
    except ImproperlyConfigured as exc:  # REDIS_CLUSTER_NODES that are not host:port
        return [Error(str(exc), id="missive.E003")]
    except Exception as exc:
        msg = f"REDIS_URL={settings.REDIS_URL} but Redis does not answer ({exc.__class__.__name__})"
        return [Error(msg, id="missive.E003")]
    return check_redis_cluster() if clustered() else []


def check_redis_cluster() -> list[CheckMessage]:
    """Every primary answers, and the broker is not a cluster node (Celery cannot use one)."""
    for node in primaries():
        try:
            node.redis_connection.ping()
        except Exception as exc:
            msg = (
                f"REDIS_CLUSTER=1 but cluster node {node.name} does not answer "
                f"({exc.__class__.__name__})"
            )
            return [Error(msg, id="missive.E004")]
    broker = parse_url(settings.CELERY_BROKER_URL)
    nodes = {(n.host, n.port) for n in get_redis_nodes()}
    if (broker.get("host"), broker.get("port")) in nodes:
        msg = (
            "REDIS_CLUSTER=1 but CELERY_BROKER_URL names a cluster node; give Celery a plain Redis"
        )
        return [Error(msg, id="missive.E005")]
    return []


@register("missive")
def check_databases(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The primary answers (nothing works without it); a replica that does not answer is a
    Warning, as its reads then go to the primary (infra/dbrouter.py)."""
    found: list[CheckMessage] = []
    for alias, setting in (("default", "DATABASE_URL"), ("replica", "DATABASE_REPLICA_URL")):
        db = settings.DATABASES.get(alias)
        if db is None or "sqlite" in db["ENGINE"]:
            continue
        try:
            health.database(alias)()
        except Exception as exc:
            where = f"{db.get('HOST')}:{db.get('PORT') or 3306}"
            msg = f"{setting} names {where} but cannot connect there ({_why(exc)})"
            if alias == "default":
                found.append(Error(msg, id="missive.E006"))
            else:
                found.append(Warning(f"{msg}; its reads go to the primary", id="missive.W006"))
    return found


@register("missive")
def check_broker(app_configs: Any = None, **kwargs: Any) -> list[CheckMessage]:
    """The Celery broker answers (the API enqueues sends and campaigns, workers consume). The
    one-machine mode's broker is its embedded Redis, checked as REDIS_URL's above."""
    if settings.REDIS_EMBEDDED:
        return []
    try:
        health.broker()
    except Exception as exc:
        url = parse_url(settings.CELERY_BROKER_URL)
        where = f"{url.get('host', '127.0.0.1')}:{url.get('port', 6379)}"
        msg = f"CELERY_BROKER_URL names {where} but no broker answers there ({type(exc).__name__})"
        return [Error(msg, id="missive.E007")]
    return []


def _why(exc: Exception) -> str:
    """The driver's code and text when it gave them (MySQL's ``(1045, "Access denied ...")``,
    ``(2003, "Can't connect ...")``, ``(1049, "Unknown database ...")``: never a password), else
    the exception's class."""
    if len(exc.args) == 2 and isinstance(exc.args[0], int):
        return f"{type(exc).__name__} {exc.args[0]}: {exc.args[1]}"
    return type(exc).__name__
