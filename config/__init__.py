"""Missive project configuration: settings, Celery app, URLs, shared Redis/HBase clients."""

from config.celery import app as celery_app

__all__ = ["celery_app"]
