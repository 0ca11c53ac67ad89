"""The base of every refusal Missive answers, whatever the interface: the API turns one into its
error body (api/exceptions.py), the admin and the management commands show its ``detail``.

Each carries the API error code and the HTTP status it maps to (API.md). The refusals the floors
below the apps raise start here, so the storage floor needs nothing from the HTTP platform:
``storage.content.InvalidContent`` is an ``InvalidInput``. The rest of the family (403, 404, 409,
429, 503, ...) is api/errors.py, which re-exports these two.
"""

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
