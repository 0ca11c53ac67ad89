"""How fast retention ages out a campaign's inbox copies, on both inbox backends.

    python scripts/bench_retention.py [--recipients 100000] [--backends sql,hbase]

For each backend and each condition, one finished campaign of ``--recipients`` recipients, sent
40 days ago, is written through the product's own batch step (``messaging.services.deliver_many``,
batches of 4,000, exactly as a campaign's workers write it) with its ledger (``Campaign``,
``CampaignBatch``), then ``retention_run(kinds=["campaign_inbox"])`` ages it out at the default
policy (RETENTION_CAMPAIGN_INBOX_DAYS=30), timed, with a live count of the batches done.
Conditions, side by side in one run:

- **cheapest**: the campaign is each recipient's only message from the sender: every copy goes
  and every conversation with it;
- **realistic**: 30% of the recipients also hold an older message from the sender (a campaign
  of 45 days ago, kept: its own ledger is not written), and half of the others read the
  campaign: for those 30% the conversation moves back to the older message (still unread: 1),
  and the unread counts of those who did not read it fall by one.

Printed per backend and condition: copies aged out per second, the wall time, and a check that
every copy is gone, no one is left with an unread count for it, and each conversation is gone or
shows the older message. Runs on the services of ``scripts/services up``, in bench_fanout's
database (missive_bench), Redis databases 14/15 and HBase table prefix ``bench``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from bench_fanout import ROOT  # noqa: F401  (sets Django up on the bench's stores)
from benchkit import prepare_stores
from django.conf import settings
from django.utils import timezone
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

from bulk.models import BatchState, Campaign, CampaignBatch, CampaignStatus
from messaging.models import Account, AccountKind, Category, Conversation
from messaging.services import deliver_many, message_store
from retention.services import retention_run
from storage import msgkey as keys
from storage.counters.store import unread_for_peers, unread_incr_many
from storage.inbox import _cached, get_inbox

DAY_MS = 86_400_000
BATCH = 4_000
CONDITIONS = {"cheapest": 0.0, "realistic": 0.3}


def key_days_ago(days: float, seq: int) -> int:
    return keys.compose(keys.now_ms() - int(days * DAY_MS), 1023, seq % 4096)


def deliver(sender: int, uids: list[int], key: int, text: str) -> None:
    message_store(sender_uid=sender, body={"type": "text", "text": text}, msgkey=key)
    for start in range(0, len(uids), BATCH):
        part = uids[start : start + BATCH]
        marker = f"b:{key}:{start}"
        deliver_many(
            sender_uid=sender,
            receiver_uids=part,
            msgkey=key,
            category=Category.BUSINESS,
            marker=marker,
        )


def seed(sender: int, uids: list[int], existing: float) -> Campaign:
    """The older message to the first ``existing`` share, then the campaign with its ledger; the
    even recipients read it."""
    Account.objects.get_or_create(uid=sender, defaults={"kind": AccountKind.BUSINESS})
    older = uids[: int(len(uids) * existing)]
    if older:
        deliver(sender, older, key_days_ago(45, 1), "an older message, kept")
    key = key_days_ago(40, 2)
    deliver(sender, uids, key, "the campaign, aging out")
    read = uids[len(older) :: 2]  # half of those with nothing else from the sender read it
    Conversation.objects.filter(owner_uid__in=read, peer_uid=sender).update(read_upto=key)
    unread_incr_many(
        owner_uids=read, peer_uid=sender, category=Category.BUSINESS, marker=None, delta=-1
    )
    ended = timezone.now() - timedelta(days=40)
    campaign = Campaign.objects.create(
        sender_uid=sender,
        msgkey=key,
        audience_type="uids",
        channel="daily",
        status=CampaignStatus.FINISHED,
        planned=True,
        total=len(uids),
        delivered=len(uids),
        finished_at=ended,
    )
    CampaignBatch.objects.bulk_create(
        CampaignBatch(
            campaign=campaign,
            index=n,
            first_uid=min(part),
            last_uid=max(part),
            uids=part,
            size=len(part),
            state=BatchState.DONE,
        )
        for n, part in enumerate(uids[i : i + BATCH] for i in range(0, len(uids), BATCH))
    )
    return campaign


def check(sender: int, uids: list[int], campaign: Campaign, existing: float) -> str:
    """Every copy gone, no unread for it, each conversation gone or on the older message."""
    inbox, key = get_inbox(), campaign.msgkey or 0
    left = sum(
        len(inbox.get_for_owners(uids[i : i + BATCH], sender, key))
        for i in range(0, len(uids), BATCH)
    )
    older = set(uids[: int(len(uids) * existing)])
    convs = dict(
        Conversation.objects.filter(owner_uid__in=uids, peer_uid=sender).values_list(
            "owner_uid", "last_msgkey"
        )
    )
    wrong_convs = sum(1 for uid in uids if (uid in convs) != (uid in older))
    stale = sum(1 for last in convs.values() if last == key)
    unread = sum(  # the older message's 1 where it is, nothing else
        unread_for_peers(uid, [sender])[sender] != (uid in older) for uid in uids
    )
    ok = not (left or wrong_convs or stale or unread)
    return (
        f"{'OK' if ok else 'WRONG'} (copies left {left}, conversations wrong {wrong_convs}, "
        f"still on the campaign {stale}, unread counts wrong {unread})"
    )


def timed_run(batches: int) -> tuple[float, dict[str, Any]]:
    columns = (BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress("    aging out", *columns, transient=True) as bar:
        task = bar.add_task("batches", total=batches)
        started = time.perf_counter()
        report = retention_run(kinds=["campaign_inbox"], progress=_advance(bar, task))
        seconds = time.perf_counter() - started
    return seconds, report.kinds[0].counts


def _advance(bar: Progress, task: Any) -> Callable[[str, int, int], None]:
    def progress(kind: str, done: int, total: int) -> None:
        bar.update(task, completed=done)

    return progress


def run(backend: str, condition: str, recipients: int, base: int) -> None:
    settings.INBOX_BACKEND = backend
    _cached.cache_clear()
    sender, uids = base, list(range(base + 1, base + 1 + recipients))
    existing = CONDITIONS[condition]
    started = time.perf_counter()
    campaign = seed(sender, uids, existing)
    seeded = time.perf_counter() - started
    seconds, counts = timed_run(len(range(0, recipients, BATCH)))
    rate = counts.get("entries", 0) / seconds if seconds else 0.0
    removed, moved = counts.get("conversations_removed", 0), counts.get("conversations_moved", 0)
    print(
        f"  {backend:5} {condition:9} {rate:9,.0f} copies/s  ({seconds:6.1f} s for "
        f"{counts.get('entries', 0):,}; conversations removed {removed:,}, moved {moved:,}; "
        f"seeded in {seeded:.1f} s)  {check(sender, uids, campaign, existing)}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--recipients", type=int, default=100_000)
    parser.add_argument("--backends", default="sql,hbase")
    args = parser.parse_args()
    prepare_stores(BATCH)
    print(
        time.strftime("bench_retention %Y-%m-%d %H:%M UTC", time.gmtime())
        + f": {args.recipients:,} recipients per campaign, batches of {BATCH:,}, "
        f"RETENTION_CAMPAIGN_INBOX_DAYS={settings.RETENTION_CAMPAIGN_INBOX_DAYS}; cheapest: no "
        "other message from the sender; realistic: 30% hold an older one, half read the campaign",
        flush=True,
    )
    base = int(time.time()) * 10_000_000
    for b, backend in enumerate(args.backends.split(",")):
        for c, condition in enumerate(CONDITIONS):
            run(backend, condition, args.recipients, base + (b * 2 + c) * 1_000_000_000)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
