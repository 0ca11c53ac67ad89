"""Group chat through a frozen store, on the production server (gunicorn + uvicorn serving
``config.asgi``) and the real services: each store in turn stopped with ``scripts/services
freeze`` (SIGSTOP: connections open, nothing answers) and resumed with ``thaw`` (in a finally).

While the store is out, a member keeps sending to the group (each send retried with its
``client_msg_id``, as a client does), reading its history, its group list and marking it read.
Every answer is a 200/201 or a 503 ``unavailable`` with ``Retry-After``, within the API's
deadline: never a 500, never a hang. Once the store is back, the member sends what its outbox still
holds (same ``client_msg_id``) and one more message: every message it sent is in the group's
history exactly once, in order (one answered 503 while its store was out may have been stored
all the same: its retry is answered 200 with it), and the other member's unread for the group
counts each of them once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from api.models import Scope
from tests.api.factories import make_api
from tests.api.test_freezes import DEADLINE_S, SLACK_S, Answer, call, report
from tests.config.test_asgi import api_server
from tests.conftest import services, wait_for

pytestmark = pytest.mark.faults
Uids = Callable[[int], list[int]]
FROZEN_S = 4.0


@pytest.fixture
def hbase_server(transactional_db: Any) -> Iterator[int]:
    """An API process whose group timelines are on HBase (the HBase freeze is theirs)."""
    with api_server(GROUP_TIMELINE_BACKEND="hbase") as port:
        yield port


@pytest.fixture
def sql_server(transactional_db: Any) -> Iterator[int]:
    with api_server(GROUP_TIMELINE_BACKEND="sql") as port:
        yield port


class Member:
    """One member's calls on one group, each answer kept."""

    def __init__(self, port: int, token: str, gid: str, uid: int) -> None:
        self.port, self.token, self.gid, self.uid = port, token, gid, uid
        self.answers: list[tuple[str, Answer]] = []
        self.accepted: list[str] = []  # the texts the API accepted, in order
        self.written = 0  # messages written so far, the last one perhaps not yet accepted

    def _call(self, what: str, method: str, path: str, body: Any = None) -> Answer:
        answer = call(self.port, method, path, self.token, body)
        self.answers.append((what, answer))
        return answer

    def send_until_accepted(self, deadline: float) -> None:
        """The next message, retried with its client_msg_id until accepted or ``deadline``; one
        not accepted by then is the next call's message again (a client keeps its outbox)."""
        if len(self.accepted) == self.written:
            self.written += 1
        text, cmid = f"m{self.written}", f"gf-{self.gid}-{self.written}"
        body = {
            "sender_uid": self.uid,
            "content": {"type": "text", "text": text},
            "client_msg_id": cmid,
        }
        while True:
            answer = self._call("send", "POST", f"/groups/{self.gid}/messages", body)
            if answer.status in (200, 201):  # 200: a retry of one stored already
                self.accepted.append(text)
                return
            if time.monotonic() > deadline:
                return
            time.sleep(0.1)

    def reads(self) -> None:
        base = f"/users/{self.uid}/groups"
        self._call("history", "GET", f"{base}/{self.gid}/messages")
        self._call("groups", "GET", base)
        self._call("read", "POST", f"{base}/{self.gid}/read", {})


def group_of(port: int, uids: Uids) -> tuple[Member, int, str]:
    sender, other = uids(2)
    token = make_api("group-freeze", [Scope.USERS]).token
    created = call(
        port, "POST", "/groups", token, {"owner_uid": sender, "name": "f", "member_uids": [other]}
    )
    assert created.status == 201, created.body
    member = Member(port, token, str(created.body["gid"]), sender)
    member.send_until_accepted(time.monotonic())  # warm: the principal is cached
    assert member.accepted == ["m1"]
    return member, other, token


def through_freeze(port: int, uids: Uids, store: str) -> None:
    member, other, token = group_of(port, uids)
    member.answers.clear()
    services("freeze", store)
    try:
        started = time.monotonic()
        while time.monotonic() - started < FROZEN_S:
            member.send_until_accepted(started + FROZEN_S)
            member.reads()
    finally:
        services("thaw", store)
    during = [a for _, a in member.answers]
    report(f"{store} frozen: group send, history, list, read", during)
    for what, a in member.answers:
        assert a.status in (200, 201, 503), (what, a.status, a.body)
        if a.status == 503:
            assert a.body["error"] == "unavailable", a.body
            assert int(a.retry_after or 0) >= 1
        assert a.seconds < DEADLINE_S + SLACK_S, f"{what} answered after {a.seconds:.2f} s"
    sent = member.written + 1  # the outbox's message, if any, then one more: accepted again
    while len(member.accepted) < sent:
        member.send_until_accepted(time.monotonic() + 20)
        assert member.accepted[-1] == f"m{member.written}", member.answers[-1][1].body

    def history() -> list[str]:
        a = call(port, "GET", f"/users/{other}/groups/{member.gid}/messages", token)
        assert a.status in (200, 503), a.body
        if a.status != 200:
            return []
        return [m["content"]["text"] for m in reversed(a.body["results"])]

    wait_for(lambda: history() == member.accepted, timeout=20, every=0.5)
    groups = call(port, "GET", f"/users/{other}/groups", token)
    unread = next(g["unread"] for g in groups.body["results"] if g["gid"] == member.gid)
    assert unread == len(member.accepted)


def test_group_chat_through_a_redis_freeze(sql_server: int, uids: Uids) -> None:
    through_freeze(sql_server, uids, "redis")


def test_group_chat_through_a_mariadb_freeze(sql_server: int, uids: Uids) -> None:
    through_freeze(sql_server, uids, "mariadb")


@pytest.mark.hbase_faults
def test_group_chat_on_hbase_through_a_thrift_freeze(hbase_server: int, uids: Uids) -> None:
    through_freeze(hbase_server, uids, "hbase-thrift")
