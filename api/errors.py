"""Domain errors. Each carries the API error code and HTTP status it maps to (see API.md)."""

from __future__ import annotations

from typing import Any


class MissiveError(Exception):
    code = "error"
    status = 400

    def __init__(self, detail: str, fields: dict[str, Any] | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        self.fields = fields


class InvalidInput(MissiveError):
    code = "invalid"


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
