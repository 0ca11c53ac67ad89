"""The base of every Missive API view: token auth, one scope, JSON bodies of bounded size, request
validation, and the error responses every operation documents.

``ApiView`` subclasses set ``required_scope`` (403 without it); bodies are JSON only (415
otherwise), carry a Content-Length (411 for a chunked body: WSGI would hand none of it over) and
are at most ``max_body_bytes`` (413 beyond, before anything is parsed). Views of
other apps extend it too (``from api.views import ApiView``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.throttling import BaseThrottle
from rest_framework.views import APIView

from api.auth import require_scope
from api.errors import InvalidInput, LengthRequired, TooLarge
from api.throttles import ClientWriteThrottle

JSON_BODY_MAX = 64 * 1024

# The error body (api.exceptions) as OpenAPI: a serializer cannot declare a "fields" field.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "example": "invalid"},
        "detail": {"type": "string"},
        "fields": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["error", "detail"],
}


def error_responses(what: Mapping[int, str]) -> dict[int, OpenApiResponse]:
    """OpenAPI responses in the error shape, one per status."""
    return {
        status: OpenApiResponse(ERROR_SCHEMA, description=text) for status, text in what.items()
    }


# The failures every operation can answer with.
ERRORS = error_responses(
    {
        400: "malformed JSON or invalid input (`fields` names each bad field)",
        401: "no, unknown or revoked token",
        403: "missing scope, or blocked by the receiver",
        404: "no such id, or one another client owns",
        411: "a chunked body without Content-Length",
        413: "request body too large",
    }
)


def validated(serializer_class: type[serializers.Serializer], data: Any) -> dict[str, Any]:
    """The serializer's validated data, or 400 naming each bad field (api.exceptions)."""
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


IDEMPOTENCY_KEY_MAX = 128


def idempotency_key(request: Request) -> str | None:
    """The request's ``Idempotency-Key`` header (1 to 128 printable ASCII characters), if any."""
    raw = request.headers.get("Idempotency-Key")
    if raw is None:
        return None
    # checked as sent (the schema's rule), then blanks around it do not count
    if len(raw) > IDEMPOTENCY_KEY_MAX or not (raw.isascii() and raw.isprintable()):
        raise InvalidInput(
            "Idempotency-Key must be 1 to 128 printable ASCII characters.",
            {"Idempotency-Key": "invalid"},
        )
    return raw.strip() or None


class StrictJSONParser(JSONParser):
    """JSON only; absurdly deep nesting is malformed input, not a server error."""

    def parse(
        self,
        stream: Any,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON nested too deeply.") from exc


def check_body_size(request: Request, limit: int) -> None:
    raw_length = request.META.get("CONTENT_LENGTH")
    if not raw_length and "chunked" in request.META.get("HTTP_TRANSFER_ENCODING", "").lower():
        # WSGI hands Django none of a body sent without a length: refuse it rather than act
        # as if it were empty.
        raise LengthRequired("Send the body with a Content-Length (no chunked encoding).")
    try:
        length = int(raw_length or 0)
    except ValueError:
        length = 0
    if length > limit:
        raise TooLarge(f"Request body over {limit} bytes.", {"body": f"{length} bytes"})


class ApiView(APIView):
    """Base of every Missive API view: token auth, one scope, JSON bodies of bounded size."""

    required_scope: ClassVar[str | None] = None
    max_body_bytes: ClassVar[int] = JSON_BODY_MAX
    parser_classes: ClassVar[list[type[BaseParser]]] = [StrictJSONParser]  # type: ignore[misc]

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)
        check_body_size(request, self.max_body_bytes)

    def get_throttles(self) -> list[BaseThrottle]:
        """Writes only, per client (api.throttles); ``throttle_classes`` stays empty, which the
        unread fast path checks before it answers reads in front of Django."""
        return [ClientWriteThrottle()]

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        if self.required_scope is not None:
            require_scope(request, self.required_scope)


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Documents ``api.auth.BearerTokenAuthentication`` in the OpenAPI schema."""

    target_class = "api.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}
