"""The API docs (api/schema.py, SPECTACULAR_SETTINGS): every operation is tagged by API.md's
sections with a summary and a description, the introduction explains tokens, scopes, the error
shape and retries, operations list only statuses they can answer, and ``/api/schema/`` shows in
a browser instead of downloading while tools still get valid OpenAPI."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest
import yaml
from django.conf import settings
from django.test import Client

from api.models import Scope
from api.schema import CANNOT_MISS

BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"
TAG_ORDER: list[str] = [tag["name"] for tag in cast(Any, settings.SPECTACULAR_SETTINGS)["TAGS"]]
TAGS = set(TAG_ORDER)


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    response = Client().get("/api/schema/", HTTP_ACCEPT="application/json")
    assert response.status_code == 200
    return dict(json.loads(response.content))


def operations(schema: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, methods in schema["paths"].items()
        for method, operation in methods.items()
    ]


def test_every_operation_has_one_known_tag_a_summary_and_a_description(
    schema: dict[str, Any],
) -> None:
    assert [t["name"] for t in schema["tags"]] == TAG_ORDER
    for method, path, operation in operations(schema):
        assert len(operation.get("tags", [])) == 1, (method, path)
        assert operation["tags"][0] in TAGS, (method, path, operation["tags"])
        assert operation.get("summary", "").strip(), (method, path)
        assert operation.get("description", "").strip(), (method, path)
    assert {op["tags"][0] for _, _, op in operations(schema)} == TAGS  # every section used


def test_the_introduction_explains_tokens_scopes_errors_ids_and_retries(
    schema: dict[str, Any],
) -> None:
    intro = schema["info"]["description"]
    for needed in (
        "Authorization: Bearer",
        "apiclient_create",
        '{"error"',
        '"detail"',
        "decimal strings",
        "Idempotency-Key",
        "Retry-After",
        "next_cursor",
        *(f"`{scope}`" for scope in Scope.values),
    ):
        assert needed in intro, needed


def test_operations_list_only_statuses_they_can_answer(schema: dict[str, Any]) -> None:
    for method, path, operation in operations(schema):
        responses = set(operation["responses"])
        if "requestBody" not in operation:
            assert not responses & {"411", "413", "415"}, (method, path)
        if method == "GET":
            assert "429" not in responses, path  # reads are not rate limited
        if operation["operationId"] in CANNOT_MISS:
            assert "404" not in responses, (method, path)
        assert "500" not in responses
    assert "/api/schema/" not in schema["paths"]  # the schema documents the API, not itself


def test_the_schema_shows_in_a_browser_and_stays_openapi_for_tools() -> None:
    client = Client()
    page = client.get("/api/schema/", HTTP_ACCEPT=BROWSER)
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/plain")  # shown, not saved
    assert "attachment" not in page.get("Content-Disposition", "")
    assert yaml.safe_load(page.content)["openapi"].startswith("3.")

    as_json = client.get("/api/schema/", {"format": "json"}, HTTP_ACCEPT=BROWSER)
    assert as_json["Content-Type"] == "application/json"
    assert "attachment" not in as_json.get("Content-Disposition", "")
    assert json.loads(as_json.content)["info"]["title"] == "Missive API"

    tool = client.get("/api/schema/")  # no Accept: what tools have always received
    assert tool["Content-Type"].startswith("application/vnd.oai.openapi")
    assert yaml.safe_load(tool.content)["paths"]
    assert client.get("/api/docs/").status_code == 200
