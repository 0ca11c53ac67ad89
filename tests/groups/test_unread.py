"""Group unread in the user's summary, their conversation list and the unread fast path: exact
against what each member could read, mentions apart, and the fast path byte-identical to the
view. ``unread_rebuild`` repairs group positions and mention markers."""

from __future__ import annotations

import random
from collections.abc import Callable
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command
from django.core.signals import request_finished, request_started
from django.db import close_old_connections

from groups import keys, state
from infra.redis import get_redis
from tests.api.factories import ClientApi, inbox_api
from tests.groups.helpers import GroupsApi, backend, users_api
from tests.unread.test_fastpath import Stack, bearer, keep_the_test_transaction, unread_path

# A request through the ASGI stack must not close the test transaction's connection.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("keep_the_test_transaction")]
Uids = Callable[[int], list[int]]
__all__ = ["backend", "keep_the_test_transaction"]


@pytest.fixture
def api() -> GroupsApi:
    return users_api()


@pytest.fixture
def bff() -> ClientApi:
    return inbox_api("bff-groups")


@pytest.fixture
def stack() -> Stack:
    return Stack()


def asgi_ready() -> None:
    """DRF's test client reconnects Django's ``close_old_connections`` after each request: take
    it off again before requests through the ASGI stack (keep_the_test_transaction's job)."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)


def test_unread_counts_groups_and_mentions_exactly(
    backend: str, api: GroupsApi, bff: ClientApi, uids: Uids
) -> None:
    owner, me, friend = uids(3)
    first = api.created(owner, [me])
    second = api.created(owner, [me, friend])
    for i in range(3):
        api.sent(first, owner, f"a{i}")
    api.sent(second, friend, "hi @me", mentions=[me])
    api.sent(second, owner, "recall me")
    api.recall(second, 2, actor=owner)
    api.sent(second, friend, "b")
    api.call(
        "POST",
        "/messages",
        {
            "sender_uid": friend,
            "receiver_uid": me,
            "content": {"type": "text", "text": "dm"},
            "client_msg_id": "dm-1",
        },
    )

    summary = bff.unread(me)
    assert summary["by_category"]["group"] == 3 + 2
    assert summary["by_category"]["stranger"] == 1
    assert summary["total"] == 1 + 5
    assert summary["mentions"] == 1
    assert api.read(me, second)[1] == {"read_seq": 3, "unread": 0}
    assert bff.unread(me)["mentions"] == 0
    assert bff.unread(me)["total"] == 1 + 3


def test_the_conversation_list_merges_groups_by_last_activity(
    backend: str, api: GroupsApi, bff: ClientApi, uids: Uids
) -> None:
    owner, me, peer = uids(3)
    quiet = api.created(owner, [me], name="quiet")
    busy = api.created(owner, [me], name="busy")
    api.call(
        "POST",
        "/messages",
        {
            "sender_uid": peer,
            "receiver_uid": me,
            "content": {"type": "text", "text": "dm"},
            "client_msg_id": "dm-2",
        },
    )
    api.sent(busy, owner, "latest @me", mentions=[me])

    items = bff.conversations(me)["results"]
    assert [i["kind"] for i in items] == ["group", "direct", "group"]
    top, direct, bottom = items
    assert (top["gid"], top["name"], top["unread"], top["mentions"]) == (busy, "busy", 1, 1)
    assert top["last_message"]["preview"] == "latest @me"
    assert top["category"] == "group"
    assert (direct["peer_uid"], direct["unread"]) == (str(peer), 1)
    assert (bottom["gid"], bottom["last_message"], bottom["unread"]) == (quiet, None, 0)

    page = bff.conversations(me, limit=2)
    assert [i["kind"] for i in page["results"]] == ["group", "direct"]
    rest = bff.conversations(me, limit=2, cursor=page["next_cursor"])
    assert ([i.get("gid") for i in rest["results"]], rest["next_cursor"]) == ([quiet], None)

    only_groups = bff.conversations(me, category="group")["results"]
    assert [g["gid"] for g in only_groups] == [busy, quiet]
    assert [i["kind"] for i in bff.conversations(me, category="stranger")["results"]] == ["direct"]
    assert [g["gid"] for g in api.groups(me)] == [busy, quiet]


def test_pages_list_every_group_once_in_activity_order_whatever_redis_kept(
    api: GroupsApi, bff: ClientApi, uids: Uids
) -> None:
    owner, me, peer = uids(3)
    gids = [api.created(owner, [me], name=f"g{i}") for i in range(6)]
    for gid in (gids[2], gids[4], gids[0]):
        api.sent(gid, owner, f"to {gid}")
    api.call(
        "POST",
        "/messages",
        {
            "sender_uid": peer,
            "receiver_uid": me,
            "content": {"type": "text", "text": "dm"},
            "client_msg_id": "dm-p",
        },
    )
    api.sent(gids[1], owner, "newest")
    ids = [str(i.get("gid") or i.get("peer_uid")) for i in bff.conversations(me)["results"]]
    assert ids == [gids[1], str(peer), gids[0], gids[4], gids[2], gids[5], gids[3]]
    redis = get_redis()  # one summary lost, one as written before it carried the sort key
    redis.delete(keys.summary(int(gids[4])))
    old = bytes(redis.get(keys.summary(int(gids[2]))) or b"")  # type: ignore[arg-type]
    redis.set(keys.summary(int(gids[2])), old.rsplit(b"|", 1)[0])

    for size in (1, 2, 3, 7):
        walked, cursor = [], None
        while True:
            page = bff.conversations(me, limit=size, **({"cursor": cursor} if cursor else {}))
            walked += [str(i.get("gid") or i.get("peer_uid")) for i in page["results"]]
            if not (cursor := page["next_cursor"]):
                break
        assert walked == ids
    groups_only = bff.conversations(me, category="group", limit=4)
    assert [g["gid"] for g in groups_only["results"]] == [gids[1], gids[0], gids[4], gids[2]]
    assert groups_only["next_cursor"] is not None
    assert [g["gid"] for g in api.groups(me)] == [i for i in ids if i != str(peer)]


def test_the_fast_path_answers_exactly_as_the_view_for_a_group_member(
    stack: Stack, api: GroupsApi, bff: ClientApi, uids: Uids
) -> None:
    owner, me = uids(2)
    gids = [api.created(owner, [me]) for _ in range(5)]
    for n, gid in enumerate(gids):
        for i in range(n):
            api.sent(gid, owner, f"m{i}", mentions=[me] if i == 0 else [])
    api.recall(gids[4], 2, actor=owner)
    asgi_ready()
    path, auth = unread_path(me), bearer(bff.token)
    cold = stack.get(path, auth)  # Django answers first and caches the principal
    warm = stack.fast(path, auth)

    assert warm == cold == stack.django_get(path, auth)
    assert warm.json["by_category"]["group"] == 0 + 1 + 2 + 3 + 3
    assert warm.json["mentions"] == 4
    assert warm.json == bff.unread(me)
    api.read(me, gids[3], upto=1)
    asgi_ready()
    moved = stack.fast(path, auth)
    assert moved == stack.django_get(path, auth)
    assert (moved.json["by_category"]["group"], moved.json["mentions"]) == (9 - 1, 3)
    assert api.hide(me, gids[2], 2)[0] in (200, 204)  # delete-for-me of an unread message
    asgi_ready()
    hidden = stack.fast(path, auth)
    assert hidden == stack.django_get(path, auth)
    assert hidden.json["by_category"]["group"] == 9 - 1 - 1


def test_the_fast_path_counts_a_member_of_many_plain_groups_as_the_view_does(
    stack: Stack, api: GroupsApi, bff: ClientApi, uids: Uids
) -> None:
    """Enough groups for the packed MGET (``state.PACK_FROM``), none with a mention, a hidden
    message or a recall: the fast path's one-pass count (``state.raw_totals``), kept right
    as a read moves a position and a send moves a summary."""
    owner, me = uids(2)
    gids = [api.created(owner, [me]) for _ in range(state.PACK_FROM + 6)]
    for n, gid in enumerate(gids[:10]):
        for i in range(n % 3 + 1):
            api.sent(gid, owner, f"m{i}")
    asgi_ready()
    path, auth = unread_path(me), bearer(bff.token)
    stack.get(path, auth)  # Django answers first and caches the principal
    first = stack.fast(path, auth)
    assert first == stack.django_get(path, auth)
    assert first.json["by_category"]["group"] == sum(n % 3 + 1 for n in range(10))
    assert first.json["mentions"] == 0
    api.read(me, gids[2])
    api.sent(gids[40], owner, "new")
    asgi_ready()
    moved = stack.fast(path, auth)
    assert moved == stack.django_get(path, auth)
    assert moved.json["by_category"]["group"] == first.json["by_category"]["group"] - 3 + 1


def _position(rng: random.Random, read: int) -> bytes:
    mentions = sorted(rng.sample(range(1, 40), rng.choice([0, 0, 0, 1, 2])))
    hidden = sorted(rng.sample(range(1, 40), rng.choice([0, 0, 0, 0, 1])))
    return b"%d|%s|%s" % (read, _csv(mentions), _csv(hidden))


def _summary(rng: random.Random, max_seq: int) -> bytes:
    recalled = sorted(rng.sample(range(1, max_seq + 1), min(max_seq, rng.choice([0, 0, 0, 1]))))
    cut = rng.choice([0, 0, 1]) if recalled else 0  # recalls dropped: some are always kept
    return b"%d|%s|%d|%d" % (max_seq, _csv(recalled), cut, 17)


def _csv(seqs: list[int]) -> bytes:
    return b",".join(b"%d" % s for s in seqs)


def test_the_one_pass_count_equals_the_group_by_group_count() -> None:
    """Random members of up to 600 groups (mentions, hidden and recalled messages, reads past a
    summary, summaries that dropped recalls): the fast path's one pass over the raw replies
    (``state.raw_totals``) counts exactly what ``summary_tally`` counts group by group."""
    rng = random.Random(12)
    for _ in range(300):
        groups = rng.choice([1, 2, 5, 50, 600])
        maxes = [rng.randrange(0, 30) for _ in range(groups)]
        values = [_position(rng, rng.randrange(0, 32)) for _ in range(groups)]
        summaries = [_summary(rng, m) for m in maxes]
        gids = [b"%d" % (9000 + g) for g in range(groups)]
        plan = state.RawPlan(gids, values, [], gids)
        expected = state._one_by_one(values, summaries)  # the reference
        assert state.raw_totals(plan, [summaries]) == expected, (values, summaries)


def test_a_missing_summary_or_another_shape_hands_the_count_back() -> None:
    gids = [b"1", b"2"]
    plan = state.RawPlan(gids, [b"1||", b"2||"], [], gids)
    assert state.raw_totals(plan, [[b"4||0|9", b"7||1|9"]]) == (3 + 5, 0)
    assert state.raw_totals(plan, [[b"4||0|9", None]]) is None  # no summary: Django answers
    assert state.raw_totals(plan, [[b"4||0", b"7||1|9"]]) == (3 + 5, 0)  # an older shape
    past = state.RawPlan(gids, [b"6||", b"2|3,9|"], [], gids)
    assert state.raw_totals(past, [[b"4||0|9", b"7||1|9"]]) == (0 + 5, 1)  # never negative


def test_a_missing_head_sends_the_fast_path_to_django_which_rebuilds_it(
    stack: Stack, api: GroupsApi, bff: ClientApi, uids: Uids
) -> None:
    owner, me = uids(2)
    gid = api.created(owner, [me])
    api.sent(gid, owner, "x")
    asgi_ready()
    path, auth = unread_path(me), bearer(bff.token)
    stack.get(path, auth)
    get_redis().delete(keys.head(int(gid)), keys.summary(int(gid)))

    before = stack.handed_on
    answer = stack.get(path, auth)
    assert stack.handed_on == before + 1
    assert answer.json["by_category"]["group"] == 1
    assert stack.fast(path, auth) == answer


def test_recalls_beyond_what_the_summary_keeps_are_counted_exactly_by_the_view(
    stack: Stack, api: GroupsApi, bff: ClientApi, uids: Uids, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(keys, "RECALLS_KEPT", 2)
    owner, behind, ahead = uids(3)
    gid = api.created(owner, [behind, ahead])
    for i in range(6):
        api.sent(gid, owner, f"m{i}")
    api.read(ahead, gid, upto=4)
    for seq in (2, 3, 5):
        assert api.recall(gid, seq, actor=owner)[0] == 200
    asgi_ready()
    auth = bearer(bff.token)
    stack.get(unread_path(behind), auth)

    before = stack.handed_on
    answer = stack.get(unread_path(behind), auth)  # recall 2 was dropped from the summary
    assert stack.handed_on == before + 1
    assert answer.json["by_category"]["group"] == 6 - 3
    assert stack.fast(unread_path(ahead), auth).json["by_category"]["group"] == 6 - 4 - 1
    assert stack.django_get(unread_path(ahead), auth) == stack.fast(unread_path(ahead), auth)


def test_unread_rebuild_repairs_group_positions_and_mentions(
    api: GroupsApi, bff: ClientApi, uids: Uids
) -> None:
    owner, me = uids(2)
    gid = api.created(owner, [me])
    api.sent(gid, owner, "one", mentions=[me])
    api.sent(gid, owner, "two")
    api.read(me, gid, upto=1)
    truth = bff.unread(me)
    get_redis().hset(keys.member(me), gid, b"0|1,2|")  # drifted: behind, a stale mention

    drifted = bff.unread(me)
    assert drifted["mentions"] == 2
    out = StringIO()
    call_command("unread_rebuild", "--uid", str(me), stdout=out)

    assert "group positions fixed: 1" in out.getvalue()
    assert bff.unread(me) == truth
    assert (truth["by_category"]["group"], truth["mentions"]) == (1, 0)


def test_reading_never_moves_a_position_back_even_from_a_stale_cache(
    api: GroupsApi, bff: ClientApi, uids: Uids, settings: Any
) -> None:
    owner, me = uids(2)
    gid = api.created(owner, [me])
    for i in range(4):
        api.sent(gid, owner, f"m{i}")
    assert api.read(me, gid, upto=3)[1] == {"read_seq": 3, "unread": 1}
    get_redis().delete(keys.member(me))  # lost: rebuilt from MySQL at the next read
    assert api.read(me, gid, upto=2)[1] == {"read_seq": 3, "unread": 1}
    assert bff.unread(me)["by_category"]["group"] == 1
