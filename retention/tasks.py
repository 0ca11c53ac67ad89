"""Celery interface of retention: the hourly beat entry ``retention-run`` calls one service.

This module imports the services it runs at the top and nothing imports it back; only the beat
sends the task (the task convention: docs/design.md, "Layers").
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from celery import shared_task

from retention import services
from retention.selectors import RetentionError


@shared_task(name="retention.run", queue="messaging", acks_late=True)
def run() -> dict[str, Any]:
    """Age out what is past its horizon. Idempotent: a redelivered or overlapping run finds less
    to do, or finds the run lock taken and leaves the work to the run that holds it."""
    try:
        return asdict(services.retention_run())
    except RetentionError as exc:
        return {"skipped": str(exc)}
