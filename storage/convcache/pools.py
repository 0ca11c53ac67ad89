"""Small fixed thread pools for the hedged reader and background rebuilds (one set per process).

A pool refuses work when every thread is busy instead of queueing it, so a hung HBase can hold at
most its own threads, never a growing backlog; the caller then does the work itself (or skips a
background rebuild). A thread that touched the database closes its connection before it returns,
so pools never hold connections between calls. Pools are keyed by pid: threads do not survive a
fork (gunicorn and Celery prefork workers get their own).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

from django.db import connections

T = TypeVar("T")


class BoundedPool:
    def __init__(self, name: str, threads: int) -> None:
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)
        self.slots = threading.BoundedSemaphore(threads)

    def submit(self, fn: Callable[[], T]) -> Future[T] | None:
        """Run ``fn`` on a free thread; None when none is free."""
        if not self.slots.acquire(blocking=False):
            return None
        try:
            return self.executor.submit(self._run, fn)
        except RuntimeError:  # the interpreter is shutting down
            self.slots.release()
            return None

    def _run(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        finally:
            self.slots.release()


_pools: dict[tuple[int, str], BoundedPool] = {}
_lock = threading.Lock()


def pool(name: str, threads: int) -> BoundedPool:
    key = (os.getpid(), name)
    with _lock:
        if key not in _pools:
            _pools[key] = BoundedPool(f"convcache-{name}", threads)
        return _pools[key]


def in_thread_with_db(fn: Callable[[], T]) -> Callable[[], T]:
    """Wrap ``fn`` so the pool thread closes its own database connection afterwards."""

    def run() -> T:
        try:
            return fn()
        finally:
            connections.close_all()

    return run
