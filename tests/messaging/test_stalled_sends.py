"""Stalled 1:1 sends never block each other (``messaging.services.sends_complete_stalled``, the
beat task ``messaging.sends_complete``), on the real stores.

A send stalls when an outage stops its delivery after its content was stored (here: HBase's
gateway unreachable, as in tests/api/test_outages.py). The pass visits every stalled send, a page
at a time: a send recalled before its delivery finished is finished as recalled (nothing
delivered, never visited again); a send that fails this pass is left for the next one and does
not stop the others; sends behind a full page of unfinishable ones are still finished.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from django.conf import settings

from messaging import services
from messaging.models import ClientMessage
from tests.api.factories import ClientApi, inbox_api, send_api
from tests.api.test_outages import closed_port, hbase_inbox, outage  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


@pytest.fixture
def hbase_down(hbase_inbox: None) -> Iterator[Callable[[], None]]:  # noqa: F811
    yield from outage(HBASE={**settings.HBASE, "PORT": closed_port(), "TIMEOUT_MS": 2000})


def stall(sender: ClientApi, alice: int, bob: int, cmid: str) -> int:
    """A send whose delivery the outage stops after its content is stored: its msgkey."""
    body = {"sender_uid": alice, "receiver_uid": bob, "client_msg_id": cmid}
    body["content"] = {"type": "text", "text": cmid}
    status, answer = sender.call("POST", "/messages", body)
    assert status == 503, answer
    return ClientMessage.objects.get(sender_uid=alice, client_msg_id=cmid).msgkey


def pending() -> set[int]:
    return set(ClientMessage.objects.filter(delivered=False).values_list("msgkey", flat=True))


def test_stalled_sends_never_block_each_other(
    uids: Uids, hbase_down: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    alice, bob = uids(2)
    sender, bff = send_api("shop", [alice]), inbox_api()
    recalled = stall(sender, alice, bob, "recalled")
    broken = [stall(sender, alice, bob, f"broken-{i}") for i in range(3)]
    last = stall(sender, alice, bob, "last")
    hbase_down()  # the stores answer again
    services.message_recall(msgkey=recalled, actor_uid=alice)  # before the sweep finished it

    deliver = services._deliver_one

    def fails_for_broken(message: services.Message, receiver_uid: int) -> None:
        if message.msgkey in broken:  # a send this pass cannot finish, whatever the reason
            raise RuntimeError("cannot be finished this pass")
        deliver(message, receiver_uid)

    monkeypatch.setattr(services, "_deliver_one", fails_for_broken)
    # pages of 2: the recalled send and a broken one fill the first, the other two the second
    assert services.sends_complete_stalled(older_than_s=0, limit=2) == 2  # recalled and last
    assert pending() == set(broken)
    history = bff.history(bob, alice)["results"]
    assert [(m["msgkey"], m["status"]) for m in history] == [(str(last), "normal")]
    assert bff.unread(bob)["total"] == 1

    monkeypatch.undo()
    assert services.sends_complete_stalled(older_than_s=0, limit=2) == 3
    assert pending() == set()
    assert services.sends_complete_stalled(older_than_s=0, limit=2) == 0
    assert len(bff.history(bob, alice)["results"]) == 4
    assert bff.unread(bob)["total"] == 4


def test_a_send_recalled_before_its_delivery_is_finished_as_recalled(
    uids: Uids, hbase_down: Callable[[], None]
) -> None:
    alice, bob = uids(2)
    sender, bff = send_api("shop", [alice]), inbox_api()
    msgkey = stall(sender, alice, bob, "gone")
    hbase_down()
    services.message_recall(msgkey=msgkey, actor_uid=alice)  # before the sweep finished it
    assert services.sends_complete_stalled(older_than_s=0) == 1
    assert services.sends_complete_stalled(older_than_s=0) == 0  # never visited again
    assert pending() == set()
    assert [m["status"] for m in bff.history(bob, alice)["results"]] in ([], ["recalled"])
    assert bff.unread(bob)["total"] == 0
