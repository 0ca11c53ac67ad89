"""Every endpoint of the API (API contract: messages, conversations, blocks, unread,
announcements, campaigns, audiences, groups, live tokens and presence, health) called once while
one store is frozen (``scripts/services freeze``: SIGSTOP, connections open, nothing answers), on
the production server (gunicorn + uvicorn serving ``config.asgi``): each answers within the API's
deadline, with its normal status or 503 ``unavailable`` + ``Retry-After``, never a 500 and never
a hang. Once the store is thawed (always, in a finally), every read answers 200 again.

Run per store with the inbox and group timelines on the backend that store serves: Redis and
MariaDB with the SQL inbox, HBase's Thrift gateway with the HBase one.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from websockets.sync.client import connect

from api.models import Scope
from bulk import fanout, ledger
from bulk.models import Campaign, CampaignStatus
from tests.api.factories import make_api
from tests.api.test_freezes import DEADLINE_S, SLACK_S, Answer, call
from tests.api.test_network_faults import proxy, redis_upstream, toxic
from tests.bulk.helpers import business_with_followers, launch
from tests.config.test_asgi import api_server
from tests.conftest import services, wait_for

pytestmark = pytest.mark.faults
Uids = Callable[[int], list[int]]
_names = itertools.count(1)


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    token: str
    body: Any = None

    @property
    def name(self) -> str:
        return f"{self.method} {self.path}"


@pytest.fixture(
    params=[
        ("redis", "sql"),
        ("mariadb", "sql"),
        pytest.param(("hbase-thrift", "hbase"), marks=pytest.mark.hbase_faults, id="hbase-thrift"),
    ],
    ids=lambda p: p[0],
)
def frozen(request: pytest.FixtureRequest, transactional_db: Any) -> Iterator[tuple[str, int]]:
    """(the store to freeze, the port of a server whose inbox is on the store's backend)."""
    store, backend = request.param
    with api_server(INBOX_BACKEND=backend, GROUP_TIMELINE_BACKEND=backend) as port:
        yield store, port


def ok(port: int, method: str, path: str, token: str, body: Any = None) -> Any:
    answer = call(port, method, path, token, body)
    assert answer.status in (200, 201), (path, answer.status, answer.body)
    return answer.body


def every_endpoint(port: int, uids: Uids) -> list[Call]:
    """A scene made through the API (a 1:1 message, a group with a message, a campaign), then
    one call of each endpoint on it."""
    alice, bob, carol, shop = uids(4)
    n = next(_names)
    users = make_api(f"sweep-users-{n}", [Scope.USERS, Scope.INBOX]).token
    shop_api = make_api(f"sweep-shop-{n}", [Scope.CAMPAIGNS], [shop]).token
    announce = make_api(f"sweep-announce-{n}", [Scope.ANNOUNCE]).token
    text = {"type": "text", "text": "hello"}
    sent = {"sender_uid": alice, "receiver_uid": bob, "content": text, "client_msg_id": "s-1"}
    msgkey = ok(port, "POST", "/messages", users, sent)["msgkey"]
    group = {"owner_uid": alice, "name": "sweep", "member_uids": [bob]}
    gid = ok(port, "POST", "/groups", users, group)["gid"]
    said = {"sender_uid": alice, "content": text, "client_msg_id": "g-1"}
    seq = ok(port, "POST", f"/groups/{gid}/messages", users, said)["seq"]
    campaign = launch(business_with_followers([shop, bob, carol])).pk
    conv, gconv = f"/users/{bob}/conversations/{alice}", f"/users/{bob}/groups/{gid}"
    return [
        Call("POST", "/messages", users, {**sent, "client_msg_id": "s-2"}),
        Call("GET", f"/users/{bob}/conversations", users),
        Call("GET", f"{conv}/messages", users),
        Call("POST", f"{conv}/read", users, {}),
        Call("GET", f"/users/{bob}/unread", users),
        Call("PUT", f"/users/{carol}/blocks/{alice}", users),
        Call("GET", f"/users/{bob}/announcements", users),
        Call("POST", "/announcements", announce, {"content": text}),
        Call("GET", "/campaigns", shop_api),
        Call("GET", f"/campaigns/{campaign}", shop_api),
        Call("POST", f"/campaigns/{campaign}/pause", shop_api),
        Call("POST", "/campaigns", shop_api, _campaign(shop, [bob, carol])),
        Call("GET", f"/groups/{gid}", users),
        Call("POST", f"/groups/{gid}/members", users, {"actor_uid": alice, "uids": [carol]}),
        Call("POST", f"/groups/{gid}/messages", users, {**said, "client_msg_id": "g-2"}),
        Call("GET", f"/users/{bob}/groups", users),
        Call("GET", f"{gconv}/messages", users),
        Call("POST", f"{gconv}/read", users, {"upto_seq": seq}),
        Call("POST", f"/users/{bob}/live-tokens", users, {"device_id": "phone"}),
        Call("GET", f"/users/{bob}/presence", users),
        Call("POST", f"/messages/{msgkey}/recall", users, {"actor_uid": alice}),
        Call("DELETE", f"{conv}/messages/{msgkey}", users),
    ]


def answer_of(port: int, c: Call) -> Answer:
    """The call's answer; status 0 when none came within the client's 10 s."""
    started = time.monotonic()
    try:
        return call(port, c.method, c.path, c.token, c.body)
    except TimeoutError:
        return Answer(0, None, None, time.monotonic() - started)


def assert_planned_by_the_sweep(campaign_id: int) -> None:
    """A campaign the API accepted is running and, once its lease has passed with no planner
    started (none runs in this test), ``bulk.sweep`` sends its planner: it is owed, not lost."""
    campaign = Campaign.objects.get(pk=campaign_id)
    assert (campaign.status, campaign.plan_heartbeat) == (CampaignStatus.RUNNING, None)
    with override_settings(BULK_LEASE_S=1):  # the sweep's own rule, with a short lease
        time.sleep(ledger.lease_seconds() + 0.5)
        fanout.sweep()
    assert Campaign.objects.get(pk=campaign_id).plan_heartbeat is not None  # sent by the sweep
    Campaign.objects.filter(pk=campaign_id).update(status=CampaignStatus.CANCELLED)


def _campaign(shop: int, uids: list[int]) -> dict[str, Any]:
    return {
        "sender_uid": shop,
        "content": {"type": "text", "text": "sale"},
        "audience": {"type": "uids", "uids": uids},
        "channel": "daily",
    }


def test_every_endpoint_answers_in_time_while_a_store_is_frozen(
    frozen: tuple[str, int], uids: Uids
) -> None:
    store, port = frozen
    calls = every_endpoint(port, uids)
    answers: list[tuple[Call, Answer]] = []
    services("freeze", store)
    try:
        answers += [(c, answer_of(port, c)) for c in calls]
    finally:
        services("thaw", store)
    assert_in_time(f"{store} frozen", answers)
    assert any(a.status == 503 for _, a in answers)  # the store was out for someone
    created = next(a for c, a in answers if c.name == "POST /campaigns")
    if created.status == 201:  # its planner may be left to the sweep: it is sent, not lost
        assert_planned_by_the_sweep(int(created.body["id"]))
    for read in [c for c in calls if c.method == "GET"]:
        wait_for(partial(answers_200, port, read), timeout=20)


def assert_in_time(what: str, answers: list[tuple[Call, Answer]]) -> None:
    """Printed; each answer its normal status or a 503 ``unavailable`` with ``Retry-After``,
    within the API's deadline."""
    print(f"\n{what}:")
    for c, a in answers:
        print(f"  {a.status} {a.seconds:6.3f} s  {c.name}")
    for c, a in answers:
        assert a.status < 500 or a.status == 503, (c.name, a.status, a.body)
        if a.status == 503:
            assert a.body["error"] == "unavailable", (c.name, a.body)
            assert int(a.retry_after or 0) >= 1, c.name
        assert a.seconds < DEADLINE_S + SLACK_S, f"{c.name} answered after {a.seconds:.2f} s"


@pytest.fixture
def broker_proxy() -> Iterator[tuple[str, int]]:
    """A toxiproxy proxy to the broker's Redis: (its name, its port)."""
    with proxy("broker", redis_upstream(settings.CELERY_BROKER_URL)[0]) as found:
        yield found


def test_every_endpoint_answers_as_usual_while_the_broker_alone_is_black_holed(
    transactional_db: Any, broker_proxy: tuple[str, int], uids: Uids
) -> None:
    """The broker on a server of its own, carrying the live channel layer too (as when the data
    keys are on a Redis Cluster), cut off (a toxiproxy ``timeout`` toxic: nothing passes,
    nothing is closed), with the 1:1 receiver's device connected; every store holding data
    answers. No endpoint needs the broker
    to answer: each gives its normal status, none a 503, within the deadline (a group send
    waited 20 s for Celery's result backend, on the broker's Redis, before tasks ignored their
    results); the campaign the API accepted is planned by the sweep once the broker is back."""
    name, broker_port = broker_proxy
    broker = f"redis://127.0.0.1:{broker_port}/{redis_upstream(settings.CELERY_BROKER_URL)[1]}"
    with api_server(CELERY_BROKER_URL=broker, LIVE_REDIS_URL=broker) as port:
        calls = every_endpoint(port, uids)
        # the 1:1 send's receiver online: a push is due
        with device_of(port, calls[0]), toxic(name, "timeout", "downstream", timeout=0):
            answers = [(c, answer_of(port, c)) for c in calls]
    assert_in_time("the broker black-holed", answers)
    assert [(c.name, a.status) for c, a in answers if a.status >= 500] == []
    created = next(a for c, a in answers if c.name == "POST /campaigns")
    assert_planned_by_the_sweep(int(created.body["id"]))


@contextmanager
def device_of(port: int, send: Call) -> Iterator[None]:
    """A live connection of ``send``'s receiver to the server on ``port``, open meanwhile."""
    receiver = send.body["receiver_uid"]
    minted = ok(port, "POST", f"/users/{receiver}/live-tokens", send.token, {"device_id": "ph"})
    with connect(f"ws://127.0.0.1:{port}/live/v1?token={minted['token']}") as ws:
        assert json.loads(ws.recv(timeout=10))["type"] == "hello"
        yield


def answers_200(port: int, read: Call) -> bool:
    return call(port, "GET", read.path, read.token).status == 200
