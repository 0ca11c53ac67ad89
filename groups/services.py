"""Group actions: create, add members, leave/remove, send, read, recall, delete-for-me, dissolve,
mute (API.md "Groups"; DESIGN.md "Group chat: read diffusion").

A send costs O(1) writes whatever the group's size: one seq from one atomic step (``UPDATE
messaging_group SET max_seq = max_seq + 1``, under the group row's lock, in the same transaction
as the content and the ledger row), the timeline entry, then one Redis round trip (the head, the
sender's read position, a marker per @mentioned member, one delivery event). Idempotent by
``(sender_uid, client_msg_id)``: a retry answers the original and never takes a seq (the ledger's
unique key rolls a racing duplicate back with its seq). The ledger row's ``completed`` is set once
the timeline (when it is outside SQL: HBase) and Redis have the message; a retry or the beat task
``groups.sends_complete`` finishes one that is not (history reads show it from the ledger until
then: ``selectors.group_history``).

Reads live in ``selectors`` (the lookups and checks below call them); writes of Redis go through
``state``, rebuilds of it from MySQL through ``repair``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Count, F
from django.db.models.functions import Greatest
from django.utils import timezone

from api.errors import Conflict, Forbidden, InvalidInput, NotFound
from groups import repair, state
from groups.models import (
    MANAGERS,
    UIDS_PER_CALL,
    Group,
    GroupHidden,
    GroupMember,
    GroupMessage,
    GroupRole,
)
from groups.selectors import (
    group_live,
    group_tally,
    ledger_row,
    member_current,
    members_current,
    timeline_entry,
    visible_range,
)
from groups.state import Position, Sent
from infra.taskref import TaskRef
from messaging import pushes
from messaging.models import Message
from messaging.services import (
    RECALL_WINDOW,
    STALLED_SEND_S,
    finish_in_pages,
    message_recall,
    message_store,
)
from storage import msgkey as keys
from storage.content import preview, validate_content
from storage.convcache.model import RECALLED_PREVIEW, last_message
from storage.events import publish_group, publish_later
from storage.timelines import get_timeline

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class GroupSendResult:
    row: GroupMessage
    created: bool


@dataclass(frozen=True)
class MembersAdded:
    added: int
    already_members: int


# -- checks --------------------------------------------------------------------------------------
def _manager(gid: int, actor_uid: int) -> GroupMember:
    actor = member_current(gid, actor_uid)
    if actor is None or actor.role not in MANAGERS:
        raise Forbidden("Only the group's owner or an admin can do this.")
    return actor


def _unique_uids(uids: Sequence[int]) -> list[int]:
    if len(uids) > UIDS_PER_CALL:
        raise InvalidInput(
            f"At most {UIDS_PER_CALL} uids per call.", {"uids": f"{len(uids)} given"}
        )
    return list(dict.fromkeys(uids))


def _check_user_limits(uids: Sequence[int]) -> None:
    """409 if any of ``uids`` is already in GROUP_MAX_PER_USER groups (one grouped read)."""
    limit = settings.GROUP_MAX_PER_USER
    full = (
        GroupMember.objects.filter(uid__in=uids, left_seq__isnull=True)
        .values("uid")
        .annotate(n=Count("gid"))
        .filter(n__gte=limit)
        .values_list("uid", flat=True)[:10]
    )
    if full:
        raise Conflict(
            f"A user belongs to at most {limit} groups.",
            {"uids": ", ".join(str(u) for u in full) + " at the limit"},
        )


# -- create and members ----------------------------------------------------------------------------
def _create_digest(owner_uid: int, name: str, uids: Sequence[int], history: bool) -> str:
    canonical = json.dumps([owner_uid, name, sorted(uids), history], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def group_create(
    *,
    owner_uid: int,
    name: str,
    member_uids: Sequence[int],
    history_for_new_members: bool = True,
    client_id: int | None = None,
    idempotency_key: str | None = None,
) -> tuple[Group, bool]:
    """Create a group with its owner and members; returns it and whether it was created (a
    replay of the same ``Idempotency-Key`` returns the original)."""
    uids = [u for u in _unique_uids(member_uids) if u != owner_uid]
    digest = _create_digest(owner_uid, name, uids, history_for_new_members)
    if idempotency_key is not None:
        found = Group.objects.filter(client_id=client_id, idempotency_key=idempotency_key).first()
        if found is not None:
            return _create_replay(found, digest), False
    _check_user_limits([owner_uid, *uids])
    if len(uids) + 1 > settings.GROUP_MEMBER_LIMIT:
        raise Conflict(f"A group holds at most {settings.GROUP_MEMBER_LIMIT} members.")
    gid = keys.next_msgkey()
    group = Group(
        gid=gid,
        name=name,
        owner_uid=owner_uid,
        member_count=len(uids) + 1,
        history_for_new_members=history_for_new_members,
        created_at=keys.created_at(gid),
        client_id=client_id if idempotency_key is not None else None,
        idempotency_key=idempotency_key,
        digest=digest,
    )
    members = [GroupMember(gid=gid, uid=owner_uid, role=GroupRole.OWNER)]
    members += [GroupMember(gid=gid, uid=u) for u in uids]
    try:
        with transaction.atomic():
            group.save(force_insert=True)
            GroupMember.objects.bulk_create(members)
    except IntegrityError:  # a concurrent replay of the same Idempotency-Key won
        found = Group.objects.get(client_id=client_id, idempotency_key=idempotency_key)
        return _create_replay(found, digest), False
    repair.head_rebuild(gid)
    state.positions_set((m.uid, gid, Position(0)) for m in members)
    return group, True


def _create_replay(group: Group, digest: str) -> Group:
    """The original group; its head and positions written again where Redis lacks them (the
    first attempt may have failed after its commit)."""
    if group.digest != digest:
        raise Conflict("Idempotency-Key was already used for a different group.")
    if group.dissolved_at is not None:
        raise NotFound("No such group.")
    repair.head_rebuild(group.gid)
    members = GroupMember.objects.filter(gid=group.gid, left_seq__isnull=True)
    rows = members.values_list("uid", "read_seq")
    state.positions_set(((u, group.gid, Position(r)) for u, r in rows), mode="ifmissing")
    return group


def group_members_add(*, gid: int, actor_uid: int, uids: Sequence[int]) -> MembersAdded:
    """Add up to UIDS_PER_CALL members (owner or admin only); each starts with nothing unread,
    and sees history if the group keeps it for new members."""
    wanted = _unique_uids(uids)
    with transaction.atomic():
        group = group_live(gid, lock=True)  # orders joins with sends: joined_seq is exact
        _manager(gid, actor_uid)
        rows = {m.uid: m for m in GroupMember.objects.filter(gid=gid, uid__in=wanted)}
        back = [u for u in wanted if u in rows and rows[u].left_seq is not None]
        new = [u for u in wanted if u not in rows]
        joining = new + back
        if group.member_count + len(joining) > settings.GROUP_MEMBER_LIMIT:
            raise Conflict(
                f"A group holds at most {settings.GROUP_MEMBER_LIMIT} members.",
                {"uids": f"{group.member_count} members, {len(joining)} more asked"},
            )
        if joining:
            _check_user_limits(joining)
        at = group.max_seq
        GroupMember.objects.bulk_create(
            [GroupMember(gid=gid, uid=u, joined_seq=at, read_seq=at) for u in new]
        )
        if back:
            GroupMember.objects.filter(gid=gid, uid__in=back).update(
                left_seq=None, joined_seq=at, read_seq=Greatest(F("read_seq"), at), role="member"
            )
        Group.objects.filter(gid=gid).update(member_count=F("member_count") + len(joining))
    state.positions_set((u, gid, Position(at)) for u in joining)
    already = [rows[u] for u in wanted if u in rows and rows[u].left_seq is None]
    # A call retried after Redis failed once it committed: the members are in, their positions
    # may not be.
    state.positions_set(((m.uid, gid, Position(m.read_seq)) for m in already), mode="ifmissing")
    return MembersAdded(len(joining), len(already))


def group_member_remove(*, gid: int, actor_uid: int, uid: int) -> None:
    """``uid`` leaves (actor = uid) or is removed (by the owner, or an admin removing a member);
    they keep what they could see up to now and see nothing sent later."""
    with transaction.atomic():
        group = group_live(gid, lock=True)
        target = member_current(gid, uid)
        if target is None:
            raise NotFound("No such member in this group.")
        if actor_uid == uid and target.role == GroupRole.OWNER:
            raise Conflict("The owner cannot leave the group.")
        if actor_uid != uid:
            actor = _manager(gid, actor_uid)
            if target.role == GroupRole.OWNER or (
                target.role == GroupRole.ADMIN and actor.role != GroupRole.OWNER
            ):
                raise Forbidden("Only the owner can remove an admin; nobody removes the owner.")
        GroupMember.objects.filter(pk=target.pk).update(left_seq=group.max_seq)
        Group.objects.filter(gid=gid).update(member_count=F("member_count") - 1)
    state.positions_drop([uid], gid)


# -- send ----------------------------------------------------------------------------------------
def _digest(gid: int, body: dict[str, Any], mentions: Sequence[int]) -> str:
    canonical = json.dumps([gid, body, sorted(mentions)], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def group_message_send(
    *,
    gid: int,
    sender_uid: int,
    content: Any,
    client_msg_id: str,
    mentions: Sequence[int] = (),
) -> GroupSendResult:
    body = validate_content(content)
    named = sorted(set(mentions) - {sender_uid})
    digest = _digest(gid, body, named)
    existing = GroupMessage.objects.filter(
        sender_uid=sender_uid, client_msg_id=client_msg_id
    ).first()
    if existing is None:
        group = group_live(gid)
        sender = member_current(gid, sender_uid)
        if sender is None:
            raise Forbidden("Only a member can send to this group.")
        if group.muted and sender.role not in MANAGERS:
            raise Forbidden("The group is muted: only its owner and admins can send.")
        try:
            mentioned = members_current(gid, named)
            return _send_new(gid, sender_uid, body, client_msg_id, digest, mentioned)
        except IntegrityError:  # a concurrent retry won the race; its seq is the one
            existing = GroupMessage.objects.get(sender_uid=sender_uid, client_msg_id=client_msg_id)
    return _replay(existing, digest)


def _next_seq(gid: int) -> int:
    """THE atomic step: the row lock serializes sends to one group until the commit."""
    table = Group._meta.db_table
    with connection.cursor() as cur:
        cur.execute(f"UPDATE {table} SET max_seq = max_seq + 1 WHERE gid = %s", [gid])
        cur.execute(f"SELECT max_seq FROM {table} WHERE gid = %s", [gid])
        return int(cur.fetchone()[0])


def _send_new(
    gid: int,
    sender_uid: int,
    body: dict[str, Any],
    client_msg_id: str,
    digest: str,
    mentioned: list[int],
) -> GroupSendResult:
    msgkey = keys.next_msgkey()
    timeline = get_timeline()
    with transaction.atomic():
        seq = _next_seq(gid)
        message = message_store(sender_uid=sender_uid, body=body, msgkey=msgkey)
        row = GroupMessage.objects.create(
            gid=gid,
            seq=seq,
            msgkey=msgkey,
            sender_uid=sender_uid,
            client_msg_id=client_msg_id,
            digest=digest,
            mentions=mentioned,
        )
        GroupMember.objects.filter(gid=gid, uid=sender_uid).update(
            read_seq=Greatest(F("read_seq"), seq)
        )
        if timeline.transactional:
            timeline.add(timeline_entry(row))
    _complete(row, message, timeline_done=timeline.transactional)
    return GroupSendResult(row, created=True)


def _complete(row: GroupMessage, message: Message, *, timeline_done: bool) -> None:
    """After the commit: the timeline (if outside SQL), then Redis; then the ledger says done."""
    if not timeline_done:
        get_timeline().add(timeline_entry(row))
    text = RECALLED_PREVIEW if row.recalled else preview(message.type, message.body)
    sent = Sent(
        gid=row.gid,
        seq=row.seq,
        msgkey=row.msgkey,
        sender_uid=row.sender_uid,
        at_ms=keys.timestamp_ms(row.msgkey),
        summary=last_message(row.msgkey, row.sender_uid, text),
        mentioned=() if row.recalled else row.mentions,
    )
    failed = state.apply_send(sent)
    if failed is not None:  # only its delivery event: published later, the send is accepted
        args = (row.gid, row.seq, row.msgkey, row.sender_uid)
        publish_later(failed, EVENTS_TASK, args, kind="group")
    GroupMessage.objects.filter(pk=row.pk).update(completed=True)
    row.completed = True
    pushes.group_sent(gid=row.gid, seq=row.seq, message=message)


EVENTS_TASK = TaskRef()  # groups/tasks.py events_publish, bound by GroupsConfig.ready


def events_publish(*, gid: int, seq: int, msgkey: int, sender_uid: int) -> None:
    """Publish the delivery event a send could not (storage/events.py ``publish_later``)."""
    publish_group(gid=gid, seq=seq, msgkey=msgkey, sender=sender_uid)


def _replay(existing: GroupMessage, digest: str) -> GroupSendResult:
    if existing.digest != digest:
        raise Conflict("client_msg_id was already used for a different message.")
    if not existing.completed:
        message = Message.objects.get(msgkey=existing.msgkey)
        _complete(existing, message, timeline_done=False)  # every step idempotent
    return GroupSendResult(existing, created=False)


def sends_complete_stalled(*, older_than_s: float = STALLED_SEND_S, limit: int = 500) -> int:
    """Finish group sends an outage or a crash interrupted after their commit (the beat task
    ``groups.sends_complete``), exactly as their retry would; returns how many were.

    Every stalled send is visited, ``limit`` rows a query in msgkey order, as
    ``messaging.services.sends_complete_stalled`` does: one that fails is logged and left for the
    next pass and the others go on, so sends that cannot be finished now never hold back later
    ones (before, the first failure ended the pass, and every pass began at the oldest)."""
    before = keys.lower_bound(timezone.now() - timedelta(seconds=older_than_s))
    stalled = GroupMessage.objects.filter(completed=False, msgkey__lt=before)
    return finish_in_pages(stalled, _complete_stalled, limit)


def _complete_stalled(row: GroupMessage) -> int:
    """1 once ``row`` is finished, 0 when it failed (left for the next pass)."""
    try:
        _replay(row, row.digest)
    except Exception:
        log.warning("groups: stalled send %s left for the next pass", row.msgkey, exc_info=True)
        return 0
    return 1


# -- retention -------------------------------------------------------------------------------------
def group_history_expired(*, gid: int, upto_seq: int) -> None:
    """Messages up to ``upto_seq`` aged out (their rows and timeline entries are gone): the
    group's list entry stops showing the last one if it was among them."""
    state.head_expire(gid, upto_seq)


# -- read, recall, delete for me -------------------------------------------------------------------
def group_mark_read(*, gid: int, uid: int, upto_seq: int | None = None) -> tuple[int, int]:
    """Move ``uid``'s read position (never backwards, never past the newest message); returns
    (read_seq, unread in this group)."""
    group = group_live(gid)
    member = member_current(gid, uid)
    if member is None:
        raise NotFound("Not a member of this group.")
    upto = group.max_seq if upto_seq is None else min(upto_seq, group.max_seq)
    GroupMember.objects.filter(pk=member.pk).update(read_seq=Greatest(F("read_seq"), upto))
    read = state.read_move(uid, gid, upto)
    if read < 0:  # the user's positions were not in Redis: rebuilt from MySQL, read moved there
        repair.positions_rebuild(uid)
        read = state.read_move(uid, gid, upto)
    unread = group_tally(uid, gid).unread
    pushes.group_read_moved(uid=uid, gid=gid, read_seq=read, unread=unread)
    return read, unread


def group_message_recall(*, gid: int, seq: int, actor_uid: int) -> GroupMessage:
    """The sender within the recall window, or the owner or an admin, recalls a message for
    everyone, through the one recall path (``messaging.services.message_recall``: the content
    flagged, then every route's fan-out, this app's ``group_copies_recall`` among them)."""
    group_live(gid)
    row = ledger_row(gid, seq)
    actor = member_current(gid, actor_uid)
    if actor is None:
        raise Forbidden("Only a member can recall a message.")
    if actor.role not in MANAGERS:
        if actor_uid != row.sender_uid:
            raise Forbidden("Only the sender, the owner or an admin can recall a message.")
        if timezone.now() - keys.created_at(row.msgkey) > RECALL_WINDOW:
            raise Forbidden("The recall window (2 minutes) has passed.")
    message_recall(msgkey=row.msgkey, actor_uid=None, operator=True)  # allowed above
    return ledger_row(gid, seq)


def group_copies_recall(message: Message) -> None:
    """A recalled message that was a group's (registered with messaging's recall in
    ``GroupsConfig.ready``, so a recall by msgkey, from the API or the admin, reaches the group
    too): its ledger row, its hidden and mention marks, its timeline entry, the group's head and
    the members' devices. Every step is idempotent, so a retry finishes an interrupted recall and
    counts nothing twice (unread drops through one ZADD into the group's recalled set)."""
    row = GroupMessage.objects.filter(msgkey=message.msgkey).first()
    if row is None:
        return
    if not row.recalled:
        GroupMessage.objects.filter(pk=row.pk).update(recalled=True)
        row.recalled = True
    gid, seq = row.gid, row.seq
    hiders = GroupHidden.objects.filter(gid=gid, seq=seq).values_list("uid", flat=True)
    state.marks_change(list(hiders), gid, seq, kind="h", op="del")  # before the recall counts
    state.marks_change(row.mentions, gid, seq, kind="m", op="del")
    get_timeline().add(timeline_entry(row))
    summary = last_message(row.msgkey, row.sender_uid, RECALLED_PREVIEW)
    state.head_recall(gid, seq, summary)
    pushes.group_recalled(gid=gid, seq=seq, msgkey=row.msgkey)


def group_message_changed(message: Message) -> None:
    """A group message's content changed in SQL, behind the application's back (registered with
    messaging's change fan-out in ``GroupsConfig.ready``; the binlog follower calls it): the
    group's head shows the new preview if it is the group's last message. History reads the
    content from MySQL and needs nothing."""
    row = GroupMessage.objects.filter(msgkey=message.msgkey).first()
    if row is None or row.recalled:
        return
    text = preview(message.type, message.body)
    state.head_edit(row.gid, row.seq, last_message(row.msgkey, row.sender_uid, text))


def group_message_hide(*, gid: int, uid: int, seq: int) -> None:
    """Delete one message for this member only (idempotent): gone from their history, and from
    their unread if they had not read it."""
    from_seq, upto = visible_range(gid, uid)
    row = ledger_row(gid, seq)
    if not from_seq < seq <= upto:
        raise NotFound("No such message in this group.")
    GroupHidden.objects.get_or_create(gid=gid, uid=uid, seq=seq)
    if not row.recalled:
        state.marks_change([uid], gid, seq, kind="h", op="add")
    pushes.group_deleted(uid=uid, gid=gid, seq=seq, msgkey=row.msgkey)


# -- operators -----------------------------------------------------------------------------------
def group_dissolve(*, gid: int) -> None:
    """Dissolve a group: it answers 404 from now on, and leaves every member's lists."""
    with transaction.atomic():
        group = group_live(gid, lock=True)
        members = list(
            GroupMember.objects.filter(gid=gid, left_seq__isnull=True).values_list("uid", flat=True)
        )
        GroupMember.objects.filter(gid=gid, left_seq__isnull=True).update(left_seq=group.max_seq)
        Group.objects.filter(gid=gid).update(dissolved_at=timezone.now(), member_count=0)
    for start in range(0, len(members), UIDS_PER_CALL):
        state.positions_drop(members[start : start + UIDS_PER_CALL], gid)
    state.head_drop(gid)


def groups_mute(*, gids: Iterable[int], muted: bool) -> int:
    """Mute (only the owner and admins may send) or unmute groups; returns how many changed."""
    return Group.objects.filter(gid__in=list(gids)).exclude(muted=muted).update(muted=muted)


def member_positions_repair(*, uids: Iterable[int]) -> int:
    """Make these users' positions in Redis what MySQL says (``manage.py unread_rebuild``);
    returns how many were fixed."""
    return repair.positions_repair_many(uids)
