"""``manage.py cache_follow``: the binlog follower, long-running, one per MariaDB primary.

Follows until SIGTERM or SIGINT, then saves its position and exits 0 (within about a second:
the primary's heartbeat). Exits non-zero on anything but an outage (cachesync/binlog.py).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from cachesync.binlog import Follower


class Command(BaseCommand):
    help = "Follow MariaDB's binlog into the conversation-list cache (one per primary)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--server-id",
            type=int,
            default=None,
            help="replica server_id to register with (default CACHESYNC_SERVER_ID)",
        )
        parser.add_argument(
            "--from-now",
            action="store_true",
            help="ignore the saved position and start at the primary's current one "
            "(after the binlog it points into was purged; rebuild the caches then)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        follower = Follower(server_id=options["server_id"], stop=stop, from_now=options["from_now"])
        follower.run()
        self.stdout.write(f"cache_follow: stopped at {follower.applied.text() or '-'}")
