"""Domain errors. Each carries the API error code and HTTP status it maps to (see API.md).

``MissiveError`` and ``InvalidInput`` (400 ``invalid``) are defined on the platform floor
(infra/errors.py) so the storage floor can raise them without importing this package; they are
re-exported here, the one place the apps import errors from.
"""

from __future__ import annotations

from infra.errors import InvalidInput, MissiveError

__all__ = [
    "Blocked",
    "Conflict",
    "Forbidden",
    "InvalidInput",
    "LengthRequired",
    "MissiveError",
    "NotFound",
    "RateLimited",
    "RetryLater",
    "TooLarge",
    "Unavailable",
]


class Forbidden(MissiveError):
    code = "forbidden"
    status = 403


class Blocked(Forbidden):
    code = "blocked"


class NotFound(MissiveError):
    code = "not_found"
    status = 404


class Conflict(MissiveError):
    code = "conflict"
    status = 409


class LengthRequired(MissiveError):
    code = "length_required"
    status = 411


class TooLarge(MissiveError):
    code = "too_large"
    status = 413


class RetryLater(MissiveError):
    """An error the same request may retry: answered with ``Retry-After: retry_after_s``."""

    def __init__(self, detail: str, retry_after_s: int) -> None:
        super().__init__(detail)
        self.retry_after_s = retry_after_s


class Unavailable(RetryLater):
    """A store (Redis, HBase, the database) did not answer."""

    code = "unavailable"
    status = 503


class RateLimited(RetryLater):
    code = "rate_limited"
    status = 429
