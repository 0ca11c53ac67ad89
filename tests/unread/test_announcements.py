"""Announcements to all users through the HTTP API: publish once, every user's unread count
shows it until they read it, and publishing writes nothing per user."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api.models import Scope
from infra.redis import get_redis
from tests.api.factories import ClientApi, inbox_api, make_api
from unread import announcements
from unread.selectors import announcements_unread

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


@pytest.fixture
def ops() -> ClientApi:
    return make_api("ops", [Scope.ANNOUNCE])


@pytest.fixture
def bff() -> ClientApi:
    return inbox_api("bff-announcements")


def publish(ops: ClientApi, content: Any) -> dict[str, Any]:
    status, body = ops.call("POST", "/announcements", {"content": content})
    assert status == 201, body
    return body


def listing(bff: ClientApi, uid: int, **query: Any) -> dict[str, Any]:
    status, body = bff.call("GET", f"/users/{uid}/announcements", **query)
    assert status == 200, body
    return body


def test_an_announcement_is_unread_for_everyone_until_each_reads_it(
    ops: ClientApi, bff: ClientApi, uids: Uids
) -> None:
    alice, bob = uids(2)
    posted = publish(ops, "Maintenance tonight 🛠️")
    assert isinstance(posted["id"], str)
    assert posted["content"] == {"type": "text", "text": "Maintenance tonight 🛠️"}
    assert bff.unread(alice)["announcements"] == 1
    assert bff.unread(bob)["announcements"] == 1
    page = listing(bff, alice)
    assert [(a["id"], a["read"]) for a in page["results"]] == [(posted["id"], False)]
    assert page["unread"] == 1

    status, body = bff.call("POST", f"/users/{alice}/announcements/read")
    assert (status, body) == (200, {"unread": 0})
    assert bff.unread(alice)["announcements"] == 0
    assert listing(bff, alice)["results"][0]["read"] is True
    assert bff.unread(bob)["announcements"] == 1

    publish(ops, {"type": "card", "title": "New", "body": "", "url": "https://example.com/n"})
    assert bff.unread(alice)["announcements"] == 1
    assert bff.unread(bob)["announcements"] == 2


def test_publishing_writes_nothing_per_user(ops: ClientApi, uids: Uids) -> None:
    users = uids(200)
    publish(ops, "first")
    for uid in users[::2]:
        announcements.announcements_mark_read(uid=uid)
    redis = get_redis()
    before = set(redis.scan_iter(count=1000))
    publish(ops, "second")
    created = set(redis.scan_iter(count=1000)) - before
    assert not [k for k in created if b"{u:" in k]  # nothing per user, only global keys
    assert len(created) <= 1  # at most the metrics hash, on its first flush
    assert [announcements_unread(u) for u in users[:4]] == [1, 2, 1, 2]


def test_pages_newest_first_with_a_cursor(ops: ClientApi, bff: ClientApi, uid: int) -> None:
    ids = [publish(ops, f"note {i}")["id"] for i in range(5)]
    first = listing(bff, uid, limit=2)
    second = listing(bff, uid, limit=2, cursor=first["next_cursor"])
    third = listing(bff, uid, limit=2, cursor=second["next_cursor"])
    seen = [a["id"] for p in (first, second, third) for a in p["results"]]
    assert seen == ids[::-1]
    assert third["next_cursor"] is None


def test_a_user_who_never_read_counts_only_the_retained_ones(
    ops: ClientApi, uid: int, settings: Any
) -> None:
    settings.ANNOUNCEMENTS_KEEP = 3
    for i in range(5):
        publish(ops, f"note {i}")
    assert announcements_unread(uid) == 3


def test_counts_survive_redis_losing_the_timeline(ops: ClientApi, bff: ClientApi, uid: int) -> None:
    publish(ops, "kept in MySQL")
    get_redis().flushdb()
    assert bff.unread(uid)["announcements"] == 1


def test_scopes_and_bad_content(ops: ClientApi, bff: ClientApi, uid: int) -> None:
    status, body = bff.call("POST", "/announcements", {"content": "hi"})
    assert (status, body["error"]) == (403, "forbidden")
    status, body = ops.call("GET", f"/users/{uid}/announcements")
    assert (status, body["error"]) == (403, "forbidden")
    status, body = ops.call("POST", "/announcements", {"content": ""})
    assert status == 400
    assert "content.text" in body["fields"]
    status, body = ops.call("POST", "/announcements", {})
    assert status == 400
    assert "content" in body["fields"]
    status, body = bff.call("GET", "/users/abc/announcements")
    assert status == 400
    assert "uid" in body["fields"]
