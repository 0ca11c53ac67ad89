"""The OpenAPI schema: its finishing touches, applied to every operation of every app
(``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``), and the view that serves it.

- path ids (``uid``, ``peer_uid``, ``msgkey``, ``id``, ``gid``, ...) are documented as what the
  views accept: 1 to 19 digits, 1 .. 2^63-1 (a larger value answers 400 naming the field);
- the audience specs refuse unknown keys (``additionalProperties: false``);
- an optional query parameter may be sent empty (``allowEmptyValue``): the same as leaving it out;
- every operation documents 406 (an ``Accept`` the API cannot honour); operations that take a
  body document 415 (not JSON) and keep 411/413; operations without one do not list them;
- every operation documents 503 (a store briefly unavailable; retry with ``Retry-After``);
- every write (POST, PUT, DELETE) documents 429: its client's write rate (api.throttles);
- 404 only where an id can miss: operations in ``CANNOT_MISS`` name no id that could (any uid
  is a user, and lists answer empty), so they do not list it.

Tags, summaries and descriptions come from each view's ``extend_schema`` (tags are
``SPECTACULAR_SETTINGS["TAGS"]``, API.md's sections); the introduction is
``SPECTACULAR_SETTINGS["DESCRIPTION"]``.

``/api/schema/`` (``SchemaView``) answers tools as before (YAML, or JSON with
``Accept: application/json`` or ``?format=json``), and a browser (``Accept: text/html``) with
the same YAML as ``text/plain`` (``?format=json``: the JSON as ``application/json``), which it
shows inline instead of saving to a file.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.renderers import OpenApiJsonRenderer2, OpenApiYamlRenderer
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from api.fields import id_string_schema
from api.views import ERROR_SCHEMA, IDEMPOTENCY_KEY_MAX

ID_PARAM_SCHEMA = {
    **id_string_schema(1),
    "description": "a 64-bit id, 1 .. 9223372036854775807, as a decimal string",
}
BODY_ONLY = ("411", "413", "415")
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
RATE_LIMITED = "over this client's write rate: retry after Retry-After seconds"
EXTRA = {
    "406": "the Accept header asks for something other than JSON",
    "415": "the body is not JSON (Content-Type)",
    "503": "a store is briefly unavailable: retry the same request after Retry-After seconds",
}
CANNOT_MISS = {
    "announcement_publish",
    "announcements_list",
    "announcements_mark_read",
    "audience_upload",
    "block_set",
    "block_unset",
    "campaign_list",
    "conversation_list",
    "conversation_history",
    "messages_delete_all",
    "unread_summary",
    "user_groups",
}


# Request objects whose views refuse unknown keys (bulk.serializers.AudienceSpecField: 400 naming
# each), so the schema closes them.
CLOSED = ("FollowersSpec", "FollowersFilterSpec", "UploadSpec", "UidsSpec")


IGNORED_QUERY = (
    "\n\n## Query parameters\nA query parameter an operation does not document is ignored; "
    "an optional one sent empty (`?cursor=`) is the same as one left out."
)


def finish(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    info = result.setdefault("info", {})
    info["description"] = info.get("description", "") + IGNORED_QUERY
    components = result.get("components", {}).get("schemas", {})
    for name in CLOSED:
        if name in components:
            components[name]["additionalProperties"] = False
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            _ids(operation)
            _idempotency_key(operation)
            _empty_queries(operation)
            _statuses(operation)
            if method.upper() in WRITES:
                operation["responses"].setdefault("429", _error(RATE_LIMITED))
            if operation.get("operationId") in CANNOT_MISS:
                operation["responses"].pop("404", None)
    return result


def _ids(operation: dict[str, Any]) -> None:
    for param in operation.get("parameters", []):
        if param.get("in") == "path":
            param["schema"] = dict(ID_PARAM_SCHEMA)


def _idempotency_key(operation: dict[str, Any]) -> None:
    """``Idempotency-Key`` as api.views.idempotency_key takes it: at most 128 printable ASCII
    characters (blank: no key)."""
    for param in operation.get("parameters", []):
        if param.get("in") == "header" and param.get("name") == "Idempotency-Key":
            param["schema"] = {
                "type": "string",
                "maxLength": IDEMPOTENCY_KEY_MAX,
                "pattern": "^[ -~]*$",
            }


def _empty_queries(operation: dict[str, Any]) -> None:
    """An optional query parameter sent empty (``?cursor=``) is the same as one left out: DRF's
    serializers read it so; the schema says it (``allowEmptyValue``)."""
    for param in operation.get("parameters", []):
        if param.get("in") == "query" and not param.get("required"):
            param["allowEmptyValue"] = True


def _statuses(operation: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    for status, text in EXTRA.items():
        responses.setdefault(status, _error(text))
    if "requestBody" not in operation:
        for status in BODY_ONLY:
            responses.pop(status, None)


def _error(description: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": ERROR_SCHEMA}}, "description": description}


class BrowserYamlRenderer(OpenApiYamlRenderer):
    """The YAML schema as plain text: what a browser shows instead of saving to a file."""

    media_type = "text/plain"
    format = "txt"
    charset = "utf-8"


class SchemaView(SpectacularAPIView):
    """``/api/schema/``: YAML or JSON for tools, plain-text YAML for a browser (module doc)."""

    def perform_content_negotiation(
        self, request: Request, force: bool = False
    ) -> tuple[BaseRenderer, str]:
        if "text/html" not in request.META.get("HTTP_ACCEPT", ""):
            return super().perform_content_negotiation(request, force)
        if request.query_params.get("format") == "json":  # a browser shows application/json
            return OpenApiJsonRenderer2(), OpenApiJsonRenderer2.media_type
        return BrowserYamlRenderer(), BrowserYamlRenderer.media_type

    @extend_schema(exclude=True)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return super().get(request, *args, **kwargs)
