"""The process-wide Redis client every app uses (redis-py with hiredis; fork-safe pool)."""

from __future__ import annotations

from functools import cache

import redis
from django.conf import settings

from config import embedded


@cache
def get_redis() -> redis.Redis:
    if settings.REDIS_EMBEDDED:
        embedded.ensure_started(settings.VAR_DIR)
    return redis.Redis.from_url(settings.REDIS_URL, health_check_interval=30)
