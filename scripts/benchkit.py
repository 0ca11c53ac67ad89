"""What several benchmark scripts share. Each script sets up its own stores (environment, then
``django.setup()``) before it calls ``prepare_stores``; ``serve`` needs nothing of Django."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def create_database(name: str) -> None:
    """The benchmark's own MariaDB database on the services' primary, if missing (utf8mb4_bin,
    as the project's); before ``django.setup()``, which needs it to exist."""
    import MySQLdb

    conn = MySQLdb.connect(host="127.0.0.1", user="missive", passwd="missive")
    conn.cursor().execute(
        f"CREATE DATABASE IF NOT EXISTS `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"
    )
    conn.close()


def serve(
    cmd: list[str], port: int, env: dict[str, str], what: str, settle_s: float = 0.0
) -> subprocess.Popen[bytes]:
    """Start a server (``cmd``, run in the project's root) and return once it listens on
    ``port`` (then ``settle_s`` more: gunicorn's workers import after the port opens)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            time.sleep(settle_s)
            return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"the {what} did not start")


def prepare_stores(batch_size: int) -> int:
    """The stores as a campaign benchmark starts from: schema migrated, HBase tables, an empty
    Redis database, the HBase index of conversation lists trusted (as the beat does once per
    Redis run), an empty task queue, the daily channel unthrottled with batches of
    ``batch_size``. Returns how many owners the index flagged."""
    from django.core.management import call_command

    from bulk.models import ChannelSetting
    from config.celery import app
    from infra.redis import get_redis
    from storage.convcache import build

    call_command("migrate", verbosity=0)
    call_command("hbase_init", verbosity=0)
    get_redis().flushdb()
    flagged = build.index_rebuild()
    app.control.purge()
    ChannelSetting.objects.update_or_create(
        channel="daily", defaults={"rate_per_s": 10**9, "batch_size": batch_size}
    )
    return flagged
