"""The groups API end to end (API.md "Groups"), on both timeline backends: what members, leavers
and outsiders see, idempotent sends without seq gaps, history visibility, recall and
delete-for-me, and every bad input answering 4xx in the error shape."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from api.models import Scope
from tests.api.factories import inbox_api, make_api, send_api
from tests.groups.helpers import GroupsApi, backend, users_api

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]
__all__ = ["backend"]


@pytest.fixture
def api() -> GroupsApi:
    return users_api()


def error(answer: tuple[int, Any], status: int) -> str:
    code, body = answer
    assert code == status, body
    assert set(body) >= {"error", "detail"}, body
    return str(body["error"])


# -- the users scope -------------------------------------------------------------------------
def test_a_users_client_sends_one_to_one_as_any_user(api: GroupsApi, uids: Uids) -> None:
    alice, bob = uids(2)
    status, body = api.call(
        "POST",
        "/messages",
        {
            "sender_uid": alice,
            "receiver_uid": bob,
            "content": {"type": "text", "text": "hi"},
            "client_msg_id": "x1",
        },
    )
    assert status == 201, body
    assert (body["sender_uid"], body["receiver_uid"]) == (str(alice), str(bob))
    assert inbox_api().unread(bob)["total"] == 1
    listed = send_api("listed-only", [alice])
    assert listed.send(bob, alice)[0] == 404  # send stays limited to its listed senders


def test_groups_need_the_users_scope_and_reads_take_inbox_too(api: GroupsApi, uids: Uids) -> None:
    owner, member = uids(2)
    gid = api.created(owner, [member])
    sender = send_api("sender", [owner])
    assert error(sender.call("POST", "/groups", {"owner_uid": owner, "name": "x"}), 403)
    bff = inbox_api()
    assert error(bff.call("POST", f"/groups/{gid}/messages", {}), 403) == "forbidden"
    assert bff.call("GET", f"/groups/{gid}")[0] == 200
    assert bff.call("GET", f"/users/{member}/groups")[0] == 200
    assert error(make_api("campaigns", [Scope.CAMPAIGNS]).call("GET", f"/groups/{gid}"), 403)


# -- a small group --------------------------------------------------------------------------
def test_a_small_group_talks_and_each_member_sees_it(
    backend: str, api: GroupsApi, uids: Uids
) -> None:
    owner, ann, ben = uids(3)
    status, group = api.create(owner, [ann, ben, owner], name="climbing 🧗")
    assert status == 201, group
    assert group["name"] == "climbing 🧗"
    assert (group["owner_uid"], group["member_count"], group["max_seq"]) == (str(owner), 3, 0)
    gid = group["gid"]
    assert isinstance(gid, str)

    first = api.sent(gid, owner, "welcome")
    assert (first["seq"], first["msgkey"].isdigit()) == (1, True)
    api.sent(gid, ann, "thanks!")
    third = api.sent(gid, owner, "ropes at 6")
    assert third["seq"] == 3

    assert api.seen(ben, gid) == ["ropes at 6", "thanks!", "welcome"]
    assert api.group_of(ben, gid)["unread"] == 3
    assert api.group_of(ann, gid)["unread"] == 1  # her own message moved her read position
    assert api.group_of(owner, gid)["unread"] == 0
    assert api.group_of(ann, gid)["read_seq"] == 2
    item = api.group_of(ben, gid)
    assert (item["max_seq"], item["last_message"]["preview"]) == (3, "ropes at 6")
    assert api.call("GET", f"/groups/{gid}")[1]["max_seq"] == 3


def test_a_retried_send_answers_the_original_and_takes_no_seq(
    backend: str, api: GroupsApi, uids: Uids
) -> None:
    owner, member = uids(2)
    gid = api.created(owner, [member])
    status, first = api.send(gid, owner, "once", cmid="c-1")
    assert status == 201
    again = api.send(gid, owner, "once", cmid="c-1")
    assert again == (200, first)
    assert api.send(gid, owner, "other text", cmid="c-1")[0] == 409
    assert api.sent(gid, owner, "next")["seq"] == 2  # no gap
    assert api.seen(member, gid) == ["next", "once"]
    assert api.group_of(member, gid)["unread"] == 2


def test_mentions_are_counted_apart_and_read_away(backend: str, api: GroupsApi, uids: Uids) -> None:
    owner, ann, ben, outsider = uids(4)
    gid = api.created(owner, [ann, ben])
    api.sent(gid, owner, "hey @ann", mentions=[ann, outsider, owner])
    api.sent(gid, owner, "all")

    assert (api.group_of(ann, gid)["mentions"], api.group_of(ben, gid)["mentions"]) == (1, 0)
    bff = inbox_api()
    assert bff.unread(ann)["mentions"] == 1
    assert bff.unread(ann)["by_category"]["group"] == 2
    assert api.read(ann, gid, upto=1) == (200, {"read_seq": 1, "unread": 1})
    assert api.group_of(ann, gid)["mentions"] == 0
    assert api.read(ann, gid) == (200, {"read_seq": 2, "unread": 0})
    assert api.read(ann, gid, upto=1) == (200, {"read_seq": 2, "unread": 0})  # never backwards
    assert bff.unread(ann)["total"] == 0


def test_history_for_new_members_follows_the_groups_setting(
    backend: str, api: GroupsApi, uids: Uids
) -> None:
    owner, early, late, later = uids(4)
    open_gid = api.created(owner, [early])
    closed_gid = api.created(owner, [early], history_for_new_members=False)
    for gid in (open_gid, closed_gid):
        api.sent(gid, owner, "before")
        assert api.add(gid, owner, [late, early]) == (200, {"added": 1, "already_members": 1})
        api.sent(gid, owner, "after")
        assert api.group_of(late, gid)["unread"] == 1  # joined with nothing unread

    assert api.seen(late, open_gid) == ["after", "before"]
    assert api.seen(late, closed_gid) == ["after"]
    assert api.seen(early, closed_gid) == ["after", "before"]
    assert api.history(later, closed_gid)[0] == 404  # never joined


def test_history_pages_by_seq(backend: str, api: GroupsApi, uids: Uids) -> None:
    owner, member = uids(2)
    gid = api.created(owner, [member])
    for i in range(7):
        api.sent(gid, owner, f"m{i}")
    _, page = api.history(member, gid, limit=3)
    assert [m["seq"] for m in page["results"]] == [7, 6, 5]
    assert page["results"][0]["sender_uid"] == str(owner)
    assert page["next_cursor"] == "5"
    seen = api.seen(member, gid, before_seq=page["next_cursor"], limit=10)
    assert seen == ["m3", "m2", "m1", "m0"]


def test_a_member_who_leaves_keeps_what_they_saw_and_nothing_later(
    backend: str, api: GroupsApi, uids: Uids
) -> None:
    owner, stays, leaves, removed = uids(4)
    gid = api.created(owner, [stays, leaves, removed])
    api.sent(gid, owner, "one")
    assert api.leave(gid, leaves) == (204, None)
    assert api.leave(gid, removed, actor=stays)[0] == 403  # a member cannot remove one
    assert api.leave(gid, removed, actor=owner) == (204, None)
    api.sent(gid, owner, "two")

    assert api.seen(leaves, gid) == ["one"]
    assert api.seen(removed, gid) == ["one"]
    assert api.seen(stays, gid) == ["two", "one"]
    assert [g["gid"] for g in api.groups(leaves)] == []
    assert inbox_api().unread(leaves)["by_category"]["group"] == 0
    assert api.send(gid, leaves, "let me back")[0] == 403
    assert api.call("GET", f"/groups/{gid}")[1]["member_count"] == 2
    assert api.leave(gid, leaves)[0] == 404
    assert api.leave(gid, owner)[0] == 409  # the owner cannot leave


def test_recall_hides_it_for_everyone_and_drops_it_from_unread_once(
    backend: str, api: GroupsApi, uids: Uids
) -> None:
    owner, sender, reader, other = uids(4)
    gid = api.created(owner, [sender, reader, other])
    api.sent(gid, sender, "keep")
    oops = api.sent(gid, sender, "oops @reader", mentions=[reader])
    assert api.read(other, gid) == (200, {"read_seq": 2, "unread": 0})
    assert api.group_of(reader, gid)["unread"] == 2

    assert api.recall(gid, oops["seq"], actor=reader)[0] == 403  # not the sender, not an admin
    status, body = api.recall(gid, oops["seq"], actor=sender)
    assert (status, body["status"], body["seq"]) == (200, "recalled", 2)
    assert api.recall(gid, oops["seq"], actor=owner)[0] == 200  # again: changes nothing

    for member in (owner, reader, other):
        newest = api.history(member, gid)[1]["results"][0]
        assert (newest["status"], newest["content"]) == ("recalled", None)
    assert api.group_of(reader, gid)["unread"] == 1
    assert api.group_of(reader, gid)["mentions"] == 0
    assert api.group_of(reader, gid)["last_message"]["preview"] == "[recalled]"
    assert api.group_of(other, gid)["unread"] == 0
    assert inbox_api().unread(reader)["total"] == 1
    assert api.recall(gid, 99, actor=owner)[0] == 404


def test_delete_for_me_hides_one_message_for_one_member(
    backend: str, api: GroupsApi, uids: Uids
) -> None:
    owner, me, you = uids(3)
    gid = api.created(owner, [me, you])
    api.sent(gid, owner, "a")
    api.sent(gid, owner, "b")
    assert api.hide(me, gid, 2) == (204, None)
    assert api.hide(me, gid, 2) == (204, None)  # idempotent

    assert api.seen(me, gid) == ["a"]
    assert api.seen(you, gid) == ["b", "a"]
    assert api.group_of(me, gid)["unread"] == 1
    assert api.group_of(you, gid)["unread"] == 2
    assert api.recall(gid, 2, actor=owner)[0] == 200  # hidden and recalled: counted once
    assert api.group_of(me, gid)["unread"] == 1
    assert api.hide(me, gid, 9)[0] == 404
    assert api.hide(uids(1)[0], gid, 1)[0] == 404


def test_a_large_group_filled_a_thousand_at_a_time_counts_exactly(
    backend: str, api: GroupsApi, uids: Uids
) -> None:
    owner, *members = uids(5001)
    gid = api.created(owner)
    for start in range(0, len(members), 1000):
        added = api.add(gid, owner, members[start : start + 1000])
        assert added == (200, {"added": 1000, "already_members": 0})
    assert api.call("GET", f"/groups/{gid}")[1]["member_count"] == 5001
    for i in range(3):
        api.sent(gid, owner, f"to everyone {i}")
    api.sent(gid, members[7], "me too")
    api.read(members[100], gid, upto=2)

    bff = inbox_api()
    sampled = {m: bff.unread(m)["by_category"]["group"] for m in members[::997]}
    assert sampled == dict.fromkeys(members[::997], 4)
    assert bff.unread(members[7])["total"] == 0
    assert bff.unread(members[100])["total"] == 2
    assert api.seen(members[-1], gid)[0] == "me too"


# -- bad input -----------------------------------------------------------------------------------
def test_outsiders_and_unknown_groups(api: GroupsApi, uids: Uids) -> None:
    owner, member, outsider = uids(3)
    gid = api.created(owner, [member])
    assert error(api.send(gid, outsider), 403) == "forbidden"
    assert error(api.history(outsider, gid), 404) == "not_found"
    assert error(api.read(outsider, gid), 404) == "not_found"
    assert error(api.add(gid, member, [outsider]), 403) == "forbidden"  # not owner nor admin
    unknown = str(int(gid) + 1)
    assert error(api.call("GET", f"/groups/{unknown}"), 404) == "not_found"
    assert error(api.send(unknown, owner), 404) == "not_found"
    assert error(api.add(unknown, owner, [outsider]), 404) == "not_found"
    assert error(api.history(owner, unknown), 404) == "not_found"
    assert error(api.recall(unknown, 1, owner), 404) == "not_found"


def test_malformed_ids_and_bodies_answer_400(api: GroupsApi, uids: Uids) -> None:
    owner, member = uids(2)
    gid = api.created(owner, [member])
    assert error(api.call("GET", "/groups/abc"), 400) == "invalid"
    assert error(api.call("GET", "/groups/-1"), 400) == "invalid"
    assert error(api.history(owner, gid, before_seq="x"), 400) == "invalid"
    assert error(api.call("POST", "/groups", {"owner_uid": owner}), 400) == "invalid"
    assert error(api.create(owner, name=""), 400) == "invalid"
    assert error(api.create(owner, ["nope"]), 400) == "invalid"
    assert error(api.create(owner, history_for_new_members="yes"), 400) == "invalid"
    assert error(api.call("POST", f"/groups/{gid}/messages", {"sender_uid": owner}), 400)
    assert error(api.send(gid, owner, ""), 400) == "invalid"
    assert error(api.send(gid, owner, mentions="all"), 400) == "invalid"
    assert error(api.add(gid, owner, []), 400) == "invalid"
    assert error(api.call("DELETE", f"/groups/{gid}/members/{member}"), 400) == "invalid"
    assert error(api.call("POST", f"/groups/{gid}/messages/1/recall", {}), 400) == "invalid"
    assert error(api.read(member, gid, upto=-1), 400) == "invalid"
    assert error(api.raw("POST", "/groups", b"{not json"), 400)


def test_over_a_thousand_uids_per_call_answer_400(api: GroupsApi, uids: Uids) -> None:
    owner = uids(1)[0]
    many = uids(1001)
    assert error(api.create(owner, many), 400) == "invalid"
    gid = api.created(owner, many[:1000])
    assert error(api.add(gid, owner, many), 400) == "invalid"
    assert api.call("GET", f"/groups/{gid}")[1]["member_count"] == 1001


def test_over_the_member_limit_answers_409(api: GroupsApi, uids: Uids, settings: Any) -> None:
    settings.GROUP_MEMBER_LIMIT = 4
    owner, *members = uids(5)
    gid = api.created(owner, members[:2])
    assert error(api.add(gid, owner, members[2:]), 409) == "conflict"
    assert api.add(gid, owner, members[2:3]) == (200, {"added": 1, "already_members": 0})
    assert error(api.create(owner, members), 409) == "conflict"


def test_a_user_in_too_many_groups_answers_409(api: GroupsApi, uids: Uids, settings: Any) -> None:
    settings.GROUP_MAX_PER_USER = 2
    first, second, third, busy = uids(4)
    api.created(first, [busy])
    api.created(second, [busy])
    gid = api.created(third, [])
    assert error(api.create(third, [busy]), 409) == "conflict"
    assert error(api.add(gid, third, [busy]), 409) == "conflict"
    assert error(api.create(busy), 409) == "conflict"


def test_an_idempotency_key_replays_a_create(api: GroupsApi, uids: Uids) -> None:
    owner, member = uids(2)
    body = {"owner_uid": owner, "name": "once", "member_uids": [member]}
    api.http.credentials(HTTP_AUTHORIZATION=f"Bearer {api.token}", HTTP_IDEMPOTENCY_KEY="k-1")
    first = api.call("POST", "/groups", body)
    again = api.call("POST", "/groups", body)
    assert first[0] == 201
    assert again == (200, first[1])
    assert error(api.call("POST", "/groups", {**body, "name": "twice"}), 409) == "conflict"
