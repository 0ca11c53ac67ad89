"""Celery interface of the unread app: the counters' periodic check (beat: config/settings.py)."""

from __future__ import annotations

from celery import shared_task

from storage.counters import epoch


@shared_task(name="unread.counters_check", acks_late=True)
def counters_check() -> bool:
    """Every 5 s: a Redis that restarted moves the counters' epoch on (lazy repair on read)."""
    return epoch.check_restart()
