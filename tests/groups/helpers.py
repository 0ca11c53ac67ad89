"""Helpers of the group tests: a ``users`` client speaking the groups API (API.md "Groups")."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from api.models import Scope
from storage import timelines as timeline
from tests.api.factories import ClientApi, make_api

_cmids = itertools.count(1)


class GroupsApi:
    """The groups endpoints by name, over a ``users`` client (``call``/``raw`` as ``Api``'s)."""

    def __init__(self, client: ClientApi) -> None:
        self.client = client
        self.http = client.http
        self.token = client.token

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> tuple[int, Any]:
        return self.client.call(method, path, body, **query)

    def raw(self, method: str, path: str, data: str | bytes | None) -> tuple[int, Any]:
        return self.client.raw(method, path, data)

    def create(
        self, owner: int, members: Iterable[int | str] = (), name: str = "friends", **extra: Any
    ) -> tuple[int, Any]:
        body = {"owner_uid": owner, "name": name, "member_uids": list(members), **extra}
        return self.call("POST", "/groups", body)

    def created(self, owner: int, members: Iterable[int] = (), **extra: Any) -> str:
        status, body = self.create(owner, members, **extra)
        assert status == 201, body
        return str(body["gid"])

    def add(self, gid: str, actor: int, uids: Iterable[int]) -> tuple[int, Any]:
        return self.call("POST", f"/groups/{gid}/members", {"actor_uid": actor, "uids": list(uids)})

    def send(
        self, gid: str, sender: int, text: str = "hi", cmid: str | None = None, **extra: Any
    ) -> tuple[int, Any]:
        body = {
            "sender_uid": sender,
            "content": {"type": "text", "text": text},
            "client_msg_id": cmid or f"g-{next(_cmids)}",
            **extra,
        }
        return self.call("POST", f"/groups/{gid}/messages", body)

    def sent(self, gid: str, sender: int, text: str = "hi", **extra: Any) -> dict[str, Any]:
        status, body = self.send(gid, sender, text, **extra)
        assert status == 201, body
        return dict(body)

    def history(self, uid: int, gid: str, **query: Any) -> tuple[int, Any]:
        return self.call("GET", f"/users/{uid}/groups/{gid}/messages", **query)

    def seen(self, uid: int, gid: str, **query: Any) -> list[str | None]:
        status, body = self.history(uid, gid, **query)
        assert status == 200, body
        return [(m["content"] or {}).get("text") for m in body["results"]]

    def groups(self, uid: int) -> list[dict[str, Any]]:
        status, body = self.call("GET", f"/users/{uid}/groups")
        assert status == 200, body
        return list(body["results"])

    def group_of(self, uid: int, gid: str) -> dict[str, Any]:
        return next(g for g in self.groups(uid) if g["gid"] == gid)

    def read(self, uid: int, gid: str, upto: int | None = None) -> tuple[int, Any]:
        body = {} if upto is None else {"upto_seq": upto}
        return self.call("POST", f"/users/{uid}/groups/{gid}/read", body)

    def leave(self, gid: str, uid: int, actor: int | None = None) -> tuple[int, Any]:
        return self.call("DELETE", f"/groups/{gid}/members/{uid}", actor_uid=actor or uid)

    def recall(self, gid: str, seq: int, actor: int) -> tuple[int, Any]:
        return self.call("POST", f"/groups/{gid}/messages/{seq}/recall", {"actor_uid": actor})

    def hide(self, uid: int, gid: str, seq: int) -> tuple[int, Any]:
        return self.call("DELETE", f"/users/{uid}/groups/{gid}/messages/{seq}")


def users_api(name: str = "consumer-backend") -> GroupsApi:
    return GroupsApi(make_api(name, [Scope.USERS]))


@pytest.fixture(params=["sql", "hbase"])
def backend(request: pytest.FixtureRequest, settings: Any) -> Iterator[str]:
    """Every group flow on both timeline backends."""
    settings.GROUP_TIMELINE_BACKEND = request.param
    timeline._cached.cache_clear()
    yield request.param
    timeline._cached.cache_clear()
