"""Missive's settings and wiring: settings, the Celery app, URLs and the ASGI/WSGI entry points.
The clients they configure live in ``infra``."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
