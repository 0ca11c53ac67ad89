"""The OpenAPI schema's finishing touches, applied to every operation of every app
(``SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]``):

- path ids (``uid``, ``peer_uid``, ``msgkey``, ``id``, ``gid``, ...) are documented as what the
  views accept: 1 to 19 digits, 1 .. 2^63-1 (a larger value answers 400 naming the field);
- every operation documents 406 (an ``Accept`` the API cannot honour); operations that take a
  body document 415 (not JSON) and keep 411/413; operations without one do not list them;
- every operation documents 503 (a store briefly unavailable; retry with ``Retry-After``);
- every write (POST, PUT, DELETE) documents 429: its client's write rate (api.throttles).
"""

from __future__ import annotations

from typing import Any

from api.views import ERROR_SCHEMA

ID_PARAM_SCHEMA = {
    "type": "string",
    "pattern": "^[1-9][0-9]{0,18}$",
    "description": "a 64-bit id, 1 .. 9223372036854775807, as a decimal string",
    "example": "7301234567890123",
}
BODY_ONLY = ("411", "413", "415")
WRITES = {"POST", "PUT", "PATCH", "DELETE"}
RATE_LIMITED = "over this client's write rate: retry after Retry-After seconds"
EXTRA = {
    "406": "the Accept header asks for something other than JSON",
    "415": "the body is not JSON (Content-Type)",
    "503": "a store is briefly unavailable: retry the same request after Retry-After seconds",
}


def finish(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    for path in result.get("paths", {}).values():
        for method, operation in path.items():
            _ids(operation)
            _statuses(operation)
            if method.upper() in WRITES:
                operation["responses"].setdefault("429", _error(RATE_LIMITED))
    return result


def _ids(operation: dict[str, Any]) -> None:
    for param in operation.get("parameters", []):
        if param.get("in") == "path":
            param["schema"] = dict(ID_PARAM_SCHEMA)


def _statuses(operation: dict[str, Any]) -> None:
    responses = operation.setdefault("responses", {})
    for status, text in EXTRA.items():
        responses.setdefault(status, _error(text))
    if "requestBody" not in operation:
        for status in BODY_ONLY:
            responses.pop(status, None)


def _error(description: str) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": ERROR_SCHEMA}}, "description": description}
