"""Pushes from every kind of traffic, received on a real WebSocket: a campaign's batches and its
recall (run here, pushed through the channel layer to a gateway process) reach its online
recipients only; a group message reaches the members' devices through a real Celery worker, and
while the broker is out from the sender's process (a small group) or once the broker answers (a
big one); a group read moves the badge on the reader's other devices."""

from __future__ import annotations

from typing import Any

import pytest

from bulk.models import CampaignBatch
from bulk.recall import batch_recall
from groups.models import UIDS_PER_CALL
from groups.services import group_create, group_members_add
from infra.redis import get_redis
from live import keys
from live.tasks import INLINE_MAX_MEMBERS, resend_parked_group_pushes
from tests.bulk.helpers import business_with_followers, launch, run_synchronously
from tests.live.conftest import Http, Opener, free_port, start_gateway

pytestmark = pytest.mark.live
Backend = tuple[Http, Http]


def test_a_campaign_and_its_recall_reach_online_recipients_and_log_nothing_for_others(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    scenario = business_with_followers(uids(4))
    online, away, *_ = scenario.followers
    phone = open_device(backend[1].port, backend[0].token_for(online, "phone"))
    campaign = launch(scenario, text="flash sale")

    run_synchronously(campaign.pk)

    got = phone.next()
    assert got["type"] == "message"
    assert got["conversation"] == {"kind": "direct", "peer_uid": str(scenario.sender)}
    assert got["message"]["msgkey"] == str(campaign.msgkey)
    assert got["message"]["content"] == {"type": "text", "text": "flash sale"}
    assert not get_redis().exists(keys.log(away))  # never online: the batch wrote nothing for it

    for batch_id in CampaignBatch.objects.filter(campaign=campaign).values_list("pk", flat=True):
        batch_recall(batch_id)  # what a recall's bulk.recall_batch tasks run
    recall = phone.next()
    assert (recall["type"], recall["msgkey"]) == ("recall", str(campaign.msgkey))
    assert recall["conversation"] == {"kind": "direct", "peer_uid": str(scenario.sender)}


def test_a_group_message_reaches_the_members_devices_and_a_read_syncs(
    backend: Backend, uids: Any, open_device: Opener, workers: Any
) -> None:
    owner, member, outsider = uids(3)
    api = backend[0]
    gid = api.ok("POST", "/groups", {"owner_uid": owner, "name": "g", "member_uids": [member]})[
        "gid"
    ]
    phone = open_device(api.port, api.token_for(member, "phone"))
    tablet = open_device(backend[1].port, api.token_for(member, "tablet"))
    stranger = open_device(api.port, api.token_for(outsider, "phone"))
    workers.start(queues="messaging", concurrency=1)
    content = {"type": "text", "text": "hi all"}
    body = {"sender_uid": owner, "content": content, "client_msg_id": "g1"}

    sent = api.ok("POST", f"/groups/{gid}/messages", body)

    for device in (phone, tablet):
        got = device.next(timeout=30)
        assert got["conversation"] == {"kind": "group", "gid": gid}
        assert (got["message"]["msgkey"], got["message"]["seq"]) == (sent["msgkey"], sent["seq"])
        assert got["message"]["content"] == content
    api.ok("POST", f"/users/{member}/groups/{gid}/read", {})
    read = tablet.next()
    assert read["type"] == "read"
    assert (read["read_upto"], read["unread"]) == (str(sent["seq"]), 0)
    assert stranger.quiet()


def test_a_group_message_reaches_the_members_devices_while_the_broker_is_down(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    """A gateway whose broker refuses every connection (nothing listens on its port): the send
    is accepted, and the members' devices get the message all the same, pushed by the sender's
    process (live.tasks: a group of one chunk). Before, the pushes were logged as lost."""
    owner, member = uids(2)
    port = free_port()
    dead_broker = f"redis://127.0.0.1:{free_port()}/0"
    gateway = start_gateway(port, CELERY_BROKER_URL=dead_broker)
    try:
        api = Http(port, backend[0].token)
        group = {"owner_uid": owner, "name": "g", "member_uids": [member]}
        gid = api.ok("POST", "/groups", group)["gid"]
        here = open_device(port, api.token_for(member, "phone"))
        elsewhere = open_device(backend[1].port, api.token_for(member, "tablet"))
        content = {"type": "text", "text": "hi"}
        body = {"sender_uid": owner, "content": content, "client_msg_id": "b"}

        sent = api.ok("POST", f"/groups/{gid}/messages", body)

        for device in (here, elsewhere):
            got = device.next()
            assert got["conversation"] == {"kind": "group", "gid": gid}
            message = got["message"]
            assert (message["msgkey"], message["seq"]) == (sent["msgkey"], sent["seq"])
    finally:
        gateway.terminate()
        gateway.wait(timeout=15)


def test_a_big_groups_message_sent_while_the_broker_is_down_reaches_the_devices_once_it_answers(
    backend: Backend, uids: Any, open_device: Opener, workers: Any
) -> None:
    """A group of more members than the sender's process pushes itself (one chunk), sent through
    a gateway whose broker refuses every connection: the send is accepted, its push is parked on
    the data Redis, and no device hears anything yet. Once the broker answers, the beat's
    ``live.resend_parked_group_pushes`` (run here) hands it to a real worker, which pushes it to
    the members' devices on both gateways. Before, such a push was lost."""
    owner, *members = uids(INLINE_MAX_MEMBERS + 1)
    group = group_create(owner_uid=owner, name="big", member_uids=members[:UIDS_PER_CALL])[0]
    for start in range(UIDS_PER_CALL, len(members), UIDS_PER_CALL):
        part = members[start : start + UIDS_PER_CALL]
        group_members_add(gid=group.gid, actor_uid=owner, uids=part)
    gid = str(group.gid)
    port = free_port()
    gateway = start_gateway(port, CELERY_BROKER_URL=f"redis://127.0.0.1:{free_port()}/0")
    try:
        api = Http(port, backend[0].token)
        here = open_device(port, api.token_for(members[0], "phone"))
        elsewhere = open_device(backend[1].port, api.token_for(members[-1], "tablet"))
        text = {"type": "text", "text": "hi"}
        body = {"sender_uid": owner, "content": text, "client_msg_id": "big"}

        sent = api.ok("POST", f"/groups/{gid}/messages", body)

        assert here.quiet()
        assert elsewhere.quiet()
        assert get_redis().llen(keys.PARKED_GROUP_PUSHES) == 1
        workers.start(queues="messaging", concurrency=1)
        assert resend_parked_group_pushes() == 1
        for device in (here, elsewhere):
            message = device.next(timeout=30)["message"]
            assert (message["msgkey"], message["seq"]) == (sent["msgkey"], sent["seq"])
        assert get_redis().llen(keys.PARKED_GROUP_PUSHES) == 0
    finally:
        gateway.terminate()
        gateway.wait(timeout=15)
