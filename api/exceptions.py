"""One error shape for the whole API (API.md): ``{"error", "detail", "fields"?}``.

| raised | status | error |
| --- | --- | --- |
| ``api.errors.MissiveError`` subclasses | their own | their own (``Retry-After`` on 429) |
| DRF ``ValidationError`` | 400 | ``invalid``, ``fields`` flattened to ``{"a.b": "message"}`` |
| DRF ``ParseError`` (bad JSON) | 400 | ``malformed_json`` |
| no token / bad token | 401 | ``unauthorized`` (with ``WWW-Authenticate``) |
| DRF / Django ``PermissionDenied`` | 403 | ``forbidden`` |
| ``Http404`` / DRF ``NotFound`` | 404 | ``not_found`` |
| Django ``RequestDataTooBig`` | 413 | ``too_large`` |
| bad media type, wrong method, throttled | 415, 405, 429 | ``unsupported_media_type``, ... |
| a store did not answer (``infra.outages``) | 503 | ``unavailable`` (with ``Retry-After``) |

A GET the database's primary failed is marked for ``api.fallback``, which reads it once more
from the replica.

Anything else is a server fault and stays a 500. A 503 names no internals (which store, which
host): the client only needs to know that the same request, retried, is safe.

URLs that no API route matches (a typo, a trailing slash) never reach DRF: ``api_not_found`` and
``api_server_error`` (``handler404`` / ``handler500`` in config/urls.py) answer those under
``/api/`` in the same shape, and leave Django's pages everywhere else (admin).
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views import defaults
from rest_framework import exceptions as drf
from rest_framework.response import Response
from rest_framework.views import set_rollback

from api.errors import MissiveError, RetryLater, Unavailable
from api.fallback import PRIMARY_OUT
from infra.outages import store_unavailable
from infra.store_errors import database_down

log = logging.getLogger(__name__)
RETRY_AFTER_S = 5
UNAVAILABLE = Unavailable(
    "A service Missive depends on is briefly unavailable; retry the same request shortly.",
    RETRY_AFTER_S,
)

DRF_CODES: dict[type[drf.APIException], str] = {
    drf.ParseError: "malformed_json",
    drf.NotAuthenticated: "unauthorized",
    drf.AuthenticationFailed: "unauthorized",
    drf.PermissionDenied: "forbidden",
    drf.NotFound: "not_found",
    drf.MethodNotAllowed: "method_not_allowed",
    drf.NotAcceptable: "not_acceptable",
    drf.UnsupportedMediaType: "unsupported_media_type",
    drf.Throttled: "rate_limited",
}


def error_body(code: str, detail: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": code, "detail": detail}
    if fields:
        body["fields"] = fields
    return body


def api_exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, MissiveError):
        return _missive(exc)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body("too_large", "Request body too large."), status=413)
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.ValidationError):
        return _validation(exc)
    if isinstance(exc, drf.APIException):
        return _drf(exc)
    if store_unavailable(exc):
        log.warning("API: a store is unavailable: %r", exc)
        if database_down(exc) and (request := context.get("request")) is not None:
            setattr(request._request, PRIMARY_OUT, True)  # the replica may read it (api.fallback)
        return _missive(UNAVAILABLE)
    return None


def _missive(exc: MissiveError) -> Response:
    set_rollback()
    response = Response(error_body(exc.code, exc.detail, exc.fields), status=exc.status)
    if isinstance(exc, RetryLater):
        response["Retry-After"] = str(max(1, exc.retry_after_s))
    return response


def _validation(exc: drf.ValidationError) -> Response:
    fields = flatten(exc.detail)
    first = next(iter(fields.items()), None)
    detail = f"Invalid input: {first[0]}: {first[1]}" if first else "Invalid input."
    set_rollback()
    return Response(error_body("invalid", detail, fields), status=400)


def _drf(exc: drf.APIException) -> Response:
    code = next((c for kind, c in DRF_CODES.items() if isinstance(exc, kind)), "error")
    headers = {}
    if auth_header := getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = auth_header
    if wait := getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(wait))
    if isinstance(exc, drf.Throttled):
        headers.update(rate_limit_headers(wait or 0))
    set_rollback()
    return Response(
        error_body(code, _sentence(exc.detail)), status=exc.status_code, headers=headers
    )


def rate_limit_headers(wait_s: float) -> dict[str, str]:
    """The IETF RateLimit fields of a write refused by the client's bucket (api/throttles.py):
    the bucket's size, nothing left, and the seconds until a write is let through again."""
    return {
        "RateLimit-Limit": str(int(settings.API_WRITE_BURST)),
        "RateLimit-Remaining": "0",
        "RateLimit-Reset": str(max(1, int(wait_s))),
    }


def _sentence(detail: Any) -> str:
    if isinstance(detail, list | tuple) and detail:
        return _sentence(detail[0])
    if isinstance(detail, dict) and detail:
        return _sentence(next(iter(detail.values())))
    return str(detail)


def flatten(detail: Any, prefix: str = "") -> dict[str, str]:
    """``{"content": {"text": ["too long"]}}`` → ``{"content.text": "too long"}``."""
    if isinstance(detail, dict):
        out: dict[str, str] = {}
        for key, value in detail.items():
            out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(detail, list | tuple):
        if all(not isinstance(d, dict | list | tuple) for d in detail):
            return {prefix or "non_field_errors": str(detail[0])} if detail else {}
        out = {}
        for i, value in enumerate(detail):
            out.update(flatten(value, f"{prefix}.{i}" if prefix else str(i)))
        return out
    return {prefix or "non_field_errors": str(detail)}


# -- URLs no API route matched (config/urls.py handler404 / handler500) --------------------------
API_PREFIX = "/api/"


def api_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if not request.path.startswith(API_PREFIX):
        return defaults.page_not_found(request, exception or Http404())
    detail = f"No API endpoint at {request.path} (paths have no trailing slash)."
    return JsonResponse(error_body("not_found", detail), status=404)


def api_server_error(request: HttpRequest) -> HttpResponse:
    if not request.path.startswith(API_PREFIX):
        return defaults.server_error(request)
    return JsonResponse(error_body("server_error", "Internal server error."), status=500)
