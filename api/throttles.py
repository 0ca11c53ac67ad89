"""Write rates per API client: a token bucket in Redis per client (``infra/lua/token_bucket.lua``).

Every request that changes something (POST, PUT, DELETE) takes one token from its client's bucket,
``API_WRITE_RATE_PER_S`` refilled per second up to ``API_WRITE_BURST``; an empty bucket answers
``429 rate_limited`` with ``Retry-After`` (the seconds until a token is back), before anything is
stored. Reads are not limited here (the unread fast path answers them in front of Django).
A Redis that does not answer lets the request through: the limiter protects the platform, it must
not be the reason a request fails.
"""

from __future__ import annotations

import logging
import math
import time
from typing import Any

from django.conf import settings
from redis.exceptions import RedisError
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle

from api.auth import ApiPrincipal
from infra.luascripts import take_tokens

log = logging.getLogger(__name__)
WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def bucket_key(client_id: int) -> str:
    return f"api:rate:{{c:{client_id}}}"


class ClientWriteThrottle(BaseThrottle):
    def __init__(self) -> None:
        self.wait_ms = 0

    def allow_request(self, request: Request, view: Any) -> bool:
        principal = request.auth
        if request.method not in WRITES or not isinstance(principal, ApiPrincipal):
            return True
        try:
            self.wait_ms = take_tokens(
                bucket_key(principal.client_id),
                rate_per_s=settings.API_WRITE_RATE_PER_S,
                capacity=settings.API_WRITE_BURST,
                want=1,
                now_ms=time.time_ns() // 1_000_000,
            )
        except RedisError:
            log.warning("API: the write-rate bucket did not answer; request let through")
            return True
        return self.wait_ms == 0

    def wait(self) -> float:
        return float(max(1, math.ceil(self.wait_ms / 1000)))
