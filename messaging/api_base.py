"""The base of every Missive API view: token auth, one scope, JSON bodies of bounded size.

``ApiView`` subclasses set ``required_scope`` (403 without it); bodies are JSON only (415
otherwise), carry a Content-Length (411 for a chunked body: WSGI would hand none of it over) and
are at most ``max_body_bytes`` (413 beyond, before anything is parsed). Views of
other apps extend it too (``from messaging.api_base import ApiView``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser
from rest_framework.request import Request
from rest_framework.views import APIView

from messaging.auth import require_scope
from messaging.errors import LengthRequired, TooLarge

JSON_BODY_MAX = 64 * 1024


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

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        if self.required_scope is not None:
            require_scope(request, self.required_scope)


class BearerTokenScheme(OpenApiAuthenticationExtension):
    """Documents ``messaging.auth.BearerTokenAuthentication`` in the OpenAPI schema."""

    target_class = "messaging.auth.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {"type": "http", "scheme": "bearer"}
