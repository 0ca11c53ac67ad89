"""One timestamp format across the API (api.fields.utc_timestamp): UTC, milliseconds, ``+00:00``,
e.g. ``2026-11-24T13:45:25.123+00:00``, in the answers of every kind of traffic and in the schema
of every response field that carries a time."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client

from api.fields import TIMESTAMP_PATTERN
from api.models import Scope
from tests.api.factories import make_api
from tests.bulk.helpers import shop

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


def times(body: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every ``*_at`` value in a JSON body, with where it was found."""
    if isinstance(body, dict):
        for key, value in body.items():
            if key.endswith("_at") and value is not None:
                yield f"{path}.{key}", value
            yield from times(value, f"{path}.{key}")
    elif isinstance(body, list):
        for i, item in enumerate(body):
            yield from times(item, f"{path}[{i}]")


def ok(answer: tuple[int, Any]) -> Any:
    status, body = answer
    assert status in (200, 201), body
    return body


def test_every_kind_of_answer_sends_one_timestamp_format(uids: Uids) -> None:
    alice, bob = uids(2)
    api = make_api(
        "clock",
        [Scope.USERS, Scope.INBOX, Scope.CAMPAIGNS, Scope.ANNOUNCE],
        [alice],
    )
    shop(alice)  # campaigns are sent by business accounts
    text = {"type": "text", "text": "hi"}
    sent = ok(api.send(alice, bob))
    group = ok(api.call("POST", "/groups", {"owner_uid": alice, "name": "g"}))
    gid = group["gid"]
    group_msg = {"sender_uid": alice, "content": text, "client_msg_id": "g1"}
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    campaign = {"sender_uid": alice, "content": text, "scheduled_at": later}
    answers = {
        "message": sent,
        "history": ok(api.call("GET", f"/users/{bob}/conversations/{alice}/messages")),
        "conversations": ok(api.call("GET", f"/users/{bob}/conversations")),
        "group": group,
        "group message": ok(api.call("POST", f"/groups/{gid}/messages", group_msg)),
        "group history": ok(api.call("GET", f"/users/{alice}/groups/{gid}/messages")),
        "announcement": ok(api.call("POST", "/announcements", {"content": "hello"})),
        "announcements": ok(api.call("GET", f"/users/{bob}/announcements")),
        "campaign": ok(
            api.call(
                "POST", "/campaigns", {**campaign, "audience": {"type": "uids", "uids": [bob]}}
            )
        ),
        "live token": ok(api.call("POST", f"/users/{bob}/live-tokens", {"device_id": "d1"})),
    }
    found = {kind: list(times(body)) for kind, body in answers.items()}
    assert all(found.values()), found  # each kind carries at least one time
    wrong = [
        (kind, where, v)
        for kind, pairs in found.items()
        for where, v in pairs
        if not re.fullmatch(TIMESTAMP_PATTERN, v)
    ]
    assert wrong == []
    assert datetime.fromisoformat(sent["created_at"]) <= datetime.now(UTC)


def test_the_schema_documents_that_format_for_every_time_it_sends() -> None:
    schema = json.loads(Client().get("/api/schema/?format=json").content)
    fields = {
        f"{name}.{prop}": spec
        for name, component in schema["components"]["schemas"].items()
        for prop, spec in component.get("properties", {}).items()
        if prop.endswith("_at")
        and spec.get("readOnly", True)
        and not name.endswith("In")
        and name not in {"CampaignCreateIn", "FollowersFilterSpec"}
    }
    assert fields  # messages, groups, announcements, campaigns, live delivery
    assert {where: spec.get("pattern") for where, spec in fields.items()} == dict.fromkeys(
        fields, TIMESTAMP_PATTERN
    )
