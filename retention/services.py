"""Retention: data past its kind's horizon ages out (``retention_run``), in bounded batches.

Kinds, run in this order (policy and cutoffs: retention/selectors.py):

- ``campaign_inbox``: each ended campaign sent before the cutoff, batch by batch of its ledger,
  the same steps as a recall (bulk/recall.py): read which recipients hold a copy
  (``Inbox.get_for_owners``), count the unread ones down (one Lua call per slice, under the marker
  ``x:<campaign>:<batch>``), delete the copies (``Inbox.remove_many``), then every conversation
  whose last message was the campaign's shows its newest remaining message or goes. Last, the
  content row: its absence marks the campaign done, so a run that died half way resumes it.
- ``history``: every inbox entry sent before the cutoff, conversation by conversation
  (``Inbox.remove_before_many``, a range on both backends); a conversation whose last message aged
  out goes, one read before the cutoff gets its unread count recounted from what is left. Group
  messages before the cutoff leave the timeline and the send ledger, and members who had not read
  them are moved past them (``group_mark_read``). Then content rows before the cutoff: nothing
  refers to them any more (every copy, every group entry is gone) except campaigns still
  running: whole months go with ``DROP PARTITION`` (a metadata change), the rest row by row.
- ``events``: delivery-stream entries older than the cutoff (``XTRIM MINID``); entries a consumer
  group had not read are added to the stream's ``:trimmed`` hash first, as the XADD trim does.
- ``ledger``: batch rows of campaigns that ended before the cutoff (their totals stay on the
  campaign). When campaign copies age out, a ledger waits for its campaign's copies to go: it is
  the list of who holds one.

Idempotent and resumable: each step re-reads the stores, the unread count-down runs before the
deletes under a marker, and a step that finds nothing changes nothing. ``dry_run`` walks the same
data and counts what would go without writing.
"""

from __future__ import annotations

import secrets
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from api.errors import NotFound
from bulk.models import Campaign, CampaignBatch
from groups.models import GroupHidden, GroupMember, GroupMessage
from groups.services import group_history_expired, group_mark_read
from infra.redis import get_redis
from messaging.models import ClientMessage, Conversation, Message
from messaging.selectors import broadcast_category
from messaging.services import conversations_drop, conversations_settle
from retention import selectors
from retention.selectors import RetentionError
from storage import events, msgkey, partitions
from storage.counters.store import unread_incr_many, unread_set
from storage.inbox import get_inbox
from storage.timelines import get_timeline

KINDS = ("campaign_inbox", "history", "events", "ledger")
LOCK_KEY = "retention:run"  # one run at a time across processes: the beat's, an operator's
LOCK_S = 6 * 3600  # outlives any run; a run killed mid-way frees it at the latest then
ROW_CHUNK = 5000  # content and ledger rows per DELETE
STREAM_PAGE = 10_000

Progress = Callable[[str, int, int], None]  # kind, done, total


def _quiet(kind: str, done: int, total: int) -> None:
    return None


@dataclass
class KindReport:
    kind: str
    days: int  # 0: kept for ever, nothing ran
    cutoff: str | None  # the instant before which the kind ages out (ISO 8601, UTC)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class RetentionReport:
    dry_run: bool
    now: str
    kinds: list[KindReport]


# -- the run ---------------------------------------------------------------------------------------
def retention_run(
    *,
    dry_run: bool = False,
    kinds: Sequence[str] = KINDS,
    now: datetime | None = None,
    progress: Progress = _quiet,
) -> RetentionReport:
    """Age out every kind in ``kinds`` at the configured policy (module docstring)."""
    unknown = sorted(set(kinds) - set(KINDS))
    if unknown:
        raise RetentionError(f"unknown kind {unknown[0]!r}: choose from {', '.join(KINDS)}")
    policy, at = selectors.policy(), now or timezone.now()
    with _exclusive(dry_run):
        return _run(kinds, at, dry_run, policy, progress)


def _run(
    kinds: Sequence[str],
    at: datetime,
    dry_run: bool,
    policy: selectors.Policy,
    progress: Progress,
) -> RetentionReport:
    days = {
        "campaign_inbox": policy.campaign_inbox_days,
        "history": policy.history_days,
        "events": policy.events_days,
        "ledger": policy.events_days,
    }
    reports = [_run_kind(k, days[k], at, dry_run, policy, progress) for k in KINDS if k in kinds]
    return RetentionReport(dry_run, at.isoformat(), reports)


@contextmanager
def _exclusive(dry_run: bool) -> Iterator[None]:
    if dry_run:
        yield
        return
    client, token = get_redis(), secrets.token_hex(8)
    if not client.set(LOCK_KEY, token, nx=True, ex=LOCK_S):
        raise RetentionError("another retention run is in progress; try again when it ends")
    try:
        yield
    finally:
        if client.get(LOCK_KEY) == token.encode():
            client.delete(LOCK_KEY)


def _run_kind(
    kind: str, days: int, now: datetime, dry_run: bool, policy: selectors.Policy, progress: Progress
) -> KindReport:
    if not days:
        return KindReport(kind, 0, None)
    since = now - timedelta(days=days)
    before = msgkey.lower_bound(since)
    if kind == "campaign_inbox":
        counts = campaign_inbox_expire(before=before, dry_run=dry_run, progress=progress)
    elif kind == "history":
        counts = history_expire(before=before, dry_run=dry_run, progress=progress)
    elif kind == "events":
        counts = events_expire(before_ms=msgkey.timestamp_ms(before), dry_run=dry_run)
    else:
        expire = bool(policy.campaign_inbox_days)
        counts = ledger_expire(before=since, campaigns_expire=expire, dry_run=dry_run)
    return KindReport(kind, days, since.isoformat(), counts)


# -- campaign copies -------------------------------------------------------------------------------
def campaign_inbox_expire(
    *, before: int, dry_run: bool, progress: Progress = _quiet
) -> dict[str, int]:
    counts: Counter[str] = Counter()
    due = selectors.campaigns_due(before)
    for done, campaign in enumerate(due, 1):
        counts.update(campaign_expire(campaign, dry_run=dry_run))
        progress("campaign_inbox", done, len(due))
    return {"campaigns": len(due), **counts}


def campaign_expire(campaign: Campaign, *, dry_run: bool) -> Counter[str]:
    counts: Counter[str] = Counter()
    for index, uids in selectors.campaign_batches(campaign.pk):
        counts.update(_batch_expire(campaign, index, uids, dry_run))
    if not dry_run:  # last: the campaign is done once its content row is gone
        Message.objects.filter(msgkey=campaign.msgkey or 0).delete()
    counts["content_rows"] += 1
    return counts


def _batch_expire(campaign: Campaign, index: int, uids: list[int], dry_run: bool) -> Counter[str]:
    sender, key, inbox = campaign.sender_uid, campaign.msgkey or 0, get_inbox()
    copies = inbox.get_for_owners(uids, sender, key)
    convs = list(Conversation.objects.filter(owner_uid__in=uids, peer_uid=sender))
    reads = {c.owner_uid: c.read_upto for c in convs}
    unread = [c.owner for c in copies if c.counts_as_unread and key > reads.get(c.owner, 0)]
    ending = [c for c in convs if c.last_msgkey == key]
    counts = Counter(entries=len(copies), unread=len(unread))
    if dry_run:
        return counts + Counter(conversations_changed=len(ending))
    marker = f"x:{campaign.pk}:{index}"  # before the deletes: a rerun never counts twice
    category = broadcast_category(sender)
    unread_incr_many(owner_uids=unread, peer_uid=sender, category=category, marker=marker, delta=-1)
    inbox.remove_many(c.key for c in copies)
    return counts + conversations_settle(ending)


# -- history ---------------------------------------------------------------------------------------
def history_expire(*, before: int, dry_run: bool, progress: Progress = _quiet) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for chunk in selectors.conversation_chunks():
        counts.update(_conversations_expire(chunk, before, dry_run))
        progress("history", counts["conversations"], 0)
    counts.update(groups_expire(before=before, dry_run=dry_run))
    counts.update(content_expire(before=before, dry_run=dry_run))
    return dict(counts)


def _conversations_expire(chunk: list[Conversation], before: int, dry_run: bool) -> Counter[str]:
    inbox = get_inbox()
    whole = [c for c in chunk if c.last_msgkey < before]
    counts = Counter(conversations=len(chunk))
    if dry_run:
        old = sum(inbox.count_before(c.owner_uid, c.peer_uid, before) for c in chunk)
        return counts + Counter(entries=old, conversations_removed=len(whole))
    pairs = [(c.owner_uid, c.peer_uid) for c in chunk]
    counts["entries"] = inbox.remove_before_many(pairs, before)
    counts["conversations_removed"] = conversations_drop(whole)
    stale = [c for c in chunk if c.last_msgkey >= before and c.read_upto < before]
    counts["unread_recounted"] = _unread_recount(stale)
    return counts


def _unread_recount(convs: Sequence[Conversation]) -> int:
    """Unread read from what is left (as ``conversation_mark_read`` does): messages that aged
    out unread no longer count. Only conversations read before the cutoff can have lost any."""
    inbox = get_inbox()
    for conv in convs:
        left = inbox.count_after(conv.owner_uid, conv.peer_uid, conv.read_upto)
        unread_set(
            owner_uid=conv.owner_uid, peer_uid=conv.peer_uid, category=conv.category, count=left
        )
    return len(convs)


def groups_expire(*, before: int, dry_run: bool) -> Counter[str]:
    """Group messages sent before ``before``, ``ROW_CHUNK`` at a time, oldest first."""
    counts: Counter[str] = Counter()
    rows = GroupMessage.objects.filter(msgkey__lt=before).order_by("msgkey")
    if dry_run:
        return Counter(group_messages=rows.count())
    while chunk := list(rows.values_list("pk", "gid", "seq")[:ROW_CHUNK]):
        by_gid: dict[int, list[int]] = {}
        for _, gid, seq in chunk:
            by_gid.setdefault(gid, []).append(seq)
        for gid, seqs in by_gid.items():
            _group_expire(gid, seqs)
        GroupMessage.objects.filter(pk__in=[pk for pk, _, _ in chunk]).delete()
        counts.update(group_messages=len(chunk), groups=len(by_gid))
    return counts


def _group_expire(gid: int, seqs: list[int]) -> None:
    """The timeline entries go, and the group's last message if it was among them; then members
    who had not read them are moved past them (their unread stops counting messages that are
    gone), then their hidden marks."""
    upto = max(seqs)
    get_timeline().remove(gid, seqs)
    group_history_expired(gid=gid, upto_seq=upto)
    behind = GroupMember.objects.filter(gid=gid, left_seq__isnull=True, read_seq__lt=upto)
    for uid in behind.values_list("uid", flat=True):
        try:
            group_mark_read(gid=gid, uid=uid, upto_seq=upto)
        except NotFound:  # dissolved, or the member left meanwhile: nothing is shown
            continue
    GroupHidden.objects.filter(gid=gid, seq__lte=upto).delete()


def content_expire(*, before: int, dry_run: bool) -> Counter[str]:
    """Content sent before ``before`` (nothing refers to it once the history before it is gone),
    except what running campaigns still deliver. Whole months first (``DROP PARTITION``)."""
    kept = selectors.kept_campaign_content(before)
    counts = Counter(content_partitions=_partitions_drop(before, kept, dry_run))
    rows = Message.objects.filter(msgkey__lt=before).exclude(msgkey__in=kept)
    sends = ClientMessage.objects.filter(msgkey__lt=before).exclude(msgkey__in=kept)
    if dry_run:
        return counts + Counter(content_rows=rows.count(), client_messages=sends.count())
    counts["content_rows"] = _delete_chunked(rows.order_by("msgkey").values_list("pk", flat=True))
    counts["client_messages"] = _delete_chunked(
        sends.order_by("msgkey").values_list("pk", flat=True)
    )
    return counts


def _partitions_drop(before: int, kept: set[int], dry_run: bool) -> int:
    """The oldest months wholly before ``before`` holding no kept content; how many. Never inside
    a caller's transaction: DDL would commit it (the row deletes after this do the work then)."""
    if connection.vendor != "mysql" or connection.in_atomic_block:
        return 0
    with connection.cursor() as cur:
        months = partitions.existing(cur) or []
        droppable = []
        for month in months:
            if month.bound > before or any(k < month.bound for k in kept):
                break
            droppable.append(month)
        if droppable and not dry_run:
            partitions.drop_before(cur, droppable[-1].plus(1))
    return len(droppable)


def _delete_chunked(pks: QuerySet[Any, int]) -> int:
    """Delete a queryset's rows by primary key, ``ROW_CHUNK`` a statement; how many went."""
    deleted = 0
    while chunk := list(pks[:ROW_CHUNK]):
        deleted += pks.model.objects.filter(pk__in=chunk).delete()[0]
    return deleted


# -- events and ledgers ----------------------------------------------------------------------------
def events_expire(*, before_ms: int, dry_run: bool) -> dict[str, int]:
    counts: Counter[str] = Counter()
    client, minid = get_redis(), f"{before_ms}-0"
    for key in events.all_stream_keys():
        old = _count_range(key, "-", f"({minid}")
        if old and not dry_run:
            _account_unread(key, minid)
            client.xtrim(key, minid=minid, approximate=False)
        counts["stream_entries"] += old
    return dict(counts)


def _count_range(key: str, low: str, high: str) -> int:
    client, total = get_redis(), 0
    while page := client.xrange(key, min=low, max=high, count=STREAM_PAGE):
        total += len(page)
        last = page[-1][0]
        low = "(" + (last.decode() if isinstance(last, bytes) else str(last))
        if len(page) < STREAM_PAGE:
            break
    return total


def _account_unread(key: str, minid: str) -> None:
    """Entries a consumer group had not read when they are trimmed go into ``<key>:trimmed``."""
    client = get_redis()
    for group in client.xinfo_groups(key):
        last = group["last-delivered-id"]
        last = last.decode() if isinstance(last, bytes) else str(last)
        lost = _count_range(key, f"({last}", f"({minid}")
        if lost:
            name = group["name"]
            client.hincrby(
                events.trimmed_key(key), name.decode() if isinstance(name, bytes) else name, lost
            )


def ledger_expire(*, before: datetime, campaigns_expire: bool, dry_run: bool) -> dict[str, int]:
    ids = selectors.ledger_due(before, campaigns_expire=campaigns_expire)
    rows = CampaignBatch.objects.filter(campaign_id__in=ids)
    if dry_run:
        return {"campaigns": len(ids), "batches": rows.count()}
    return {
        "campaigns": len(ids),
        "batches": _delete_chunked(rows.order_by("pk").values_list("pk", flat=True)),
    }
