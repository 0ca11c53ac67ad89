"""Rebuild group heads and member positions in Redis from MySQL, the truth (a cache miss, a
Redis that lost keys, ``unread_rebuild``). Both are max-merges: a rebuild racing a send or a read
never moves a head or a read position back."""

from __future__ import annotations

from collections.abc import Iterable

from groups import state
from groups.models import Group, GroupHidden, GroupMember, GroupMessage
from groups.state import Head, Position
from messaging.convlist import message_preview
from messaging.models import Message
from storage import msgkey as keys
from storage.convcache.model import RECALLED_PREVIEW, last_message


def head_rebuild(gid: int) -> Head | None:
    """Write the group's head from MySQL; None for a group that does not exist (or dissolved)."""
    group = Group.objects.filter(gid=gid, dissolved_at__isnull=True).first()
    if group is None:
        return None
    newest = GroupMessage.objects.filter(gid=gid).order_by("-seq").first()
    recalled = GroupMessage.objects.filter(gid=gid, recalled=True).values_list("seq", flat=True)
    head = Head(group.max_seq, keys.timestamp_ms(gid), gid, None)
    shown = 0
    if newest is not None:
        head = Head(group.max_seq, keys.timestamp_ms(newest.msgkey), newest.msgkey, summary(newest))
        shown = newest.seq
    state.head_fill(gid, head, shown, list(recalled))
    return head


def summary(row: GroupMessage) -> dict[str, object]:
    message = Message.objects.filter(msgkey=row.msgkey).first()
    text = RECALLED_PREVIEW if row.recalled or message is None else message_preview(message)
    return last_message(row.msgkey, row.sender_uid, text)


def positions_rebuild(uid: int) -> int:
    """Write ``uid``'s positions in their current groups; returns how many groups."""
    rows = list(
        GroupMember.objects.filter(uid=uid, left_seq__isnull=True).values_list("gid", "read_seq")
    )
    state.positions_set(((uid, gid, position(uid, gid, read)) for gid, read in rows), mode="keep")
    state.positions_mark_built(uid, empty=not rows)
    return len(rows)


def position(uid: int, gid: int, read: int) -> Position:
    """Mentions and hidden-for-me markers after ``read``, of messages not recalled."""
    after = GroupMessage.objects.filter(gid=gid, seq__gt=read, recalled=False)
    mentions = tuple(s for s, names in after.values_list("seq", "mentions") if uid in names)
    hidden = list(
        GroupHidden.objects.filter(gid=gid, uid=uid, seq__gt=read).values_list("seq", flat=True)
    )
    if hidden:  # a recalled message already counts nothing: hiding it must not count it twice
        hidden = list(after.filter(seq__in=hidden).values_list("seq", flat=True))
    return Position(read, mentions, tuple(sorted(hidden)))


def positions_repair(uid: int) -> int:
    """Make ``uid``'s positions in Redis what MySQL says (``unread_rebuild``): rewrite those that
    differ, drop those of groups they left; returns how many were fixed. Read positions are
    taken from MySQL, which every read moves first."""
    rows = dict(
        GroupMember.objects.filter(uid=uid, left_seq__isnull=True).values_list("gid", "read_seq")
    )
    stored = state.parse_positions(state.positions_raw(uid))
    truth = {gid: position(uid, gid, read) for gid, read in rows.items()}
    wrong = [gid for gid, p in truth.items() if stored.get(gid) != p]
    stale = [gid for gid in stored if gid not in truth]
    state.positions_set((uid, gid, truth[gid]) for gid in wrong)
    for gid in stale:
        state.positions_drop([uid], gid)
    state.positions_mark_built(uid, empty=not truth)
    return len(wrong) + len(stale)


def positions_repair_many(uids: Iterable[int]) -> int:
    return sum(positions_repair(uid) for uid in uids)
