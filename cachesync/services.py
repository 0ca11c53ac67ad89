"""Applying a ``ChangeSet`` to the caches through the application's own functions.

``changes_apply`` makes exactly the pushes the application makes after its own writes, never a
second cache writer, through messaging's services (``storage.convcache.writer`` underneath):
``conversations_forget`` for deleted conversations (one bulk push), ``conversations_refresh``
for changed ones (a fan-out's batch of one peer and many owners is one bulk push), and
``conversations_bump`` (bump mtime, then push) for changes whose row shows no newer mtime,
including the conversations whose last message changed. A conversation whose read position or
category changed, or that was deleted with messages unread, gets its unread count recomputed from
its row as it is now and the inbox (``unread_conversations_recount``: as the repair after a Redis
restart counts, guarded against a delivery's count on its way; the owner's other counts stay),
as the application sets it after its own such writes. A changed
conversation that every tier holds at its row's mtime already is not pushed again (the
application's own write-through put it there; the check: held.py). Every push is the mtime
compare-and-set of the tiers, so applying a ChangeSet twice, or after a newer one,
changes nothing: the caller may replay it until it lands.

Runs inside ``caches_strict()``: a tier that missed a push and was neither dropped nor marked
dirty raises ``CachePushFailed``; a store that does not answer raises its own error
(``infra.store_errors.store_unavailable``). Either way nothing is lost: the follower waits and
applies the same ChangeSet again, and saves its position only after this returns.

A message updated in SQL goes on to ``messages_changed_outside``: a recall set there is finished
as the application finishes its own (every copy flagged, the unread ones counted down, a
campaign's batches recalled), unless the application made it; any other change reaches a
campaign's recipients' conversations through its ledger (``bulk.refresh_batch`` per batch).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from django.db.models import Q

from cachesync.changes import ChangeSet, Pair
from messaging.models import ClientMessage, Conversation
from messaging.services import (
    caches_strict,
    conversations_bump,
    conversations_forget,
    conversations_refresh,
    conversations_unheld,
    messages_changed_outside,
)
from unread.services import unread_conversations_recount


@dataclass(frozen=True)
class Applied:
    skipped: int  # refreshes every tier held already
    recalls: int  # recalls set in SQL, finished as the application's own


def changes_apply(changes: ChangeSet) -> Applied:
    """Push one transaction's changes into every cache tier (module docstring)."""
    with caches_strict():
        _forget(changes.forget)
        bump = changes.bump | showing(changes.messages)
        wanted = {p: mtime for p, mtime in changes.refresh.items() if p not in bump}
        refresh = conversations_unheld(wanted)
        if refresh:
            conversations_refresh(refresh)
        if bump:
            conversations_bump(sorted(bump))
        recalls = messages_changed_outside(sorted(changes.edited), sorted(changes.recalled))
    if changes.recount:  # the unread app's recount, safe beside deliveries (unread/rebuild.py)
        unread_conversations_recount(changes.recount)
    return Applied(len(wanted) - len(refresh), recalls)


def _forget(versions: Mapping[Pair, int]) -> None:
    """One bulk push of tombstones (``forget_many``: one probe for all of them)."""
    if versions:
        conversations_forget([(owner, peer, v) for (owner, peer), v in versions.items()])


def showing(msgkeys: set[int]) -> set[Pair]:
    """The 1:1 conversations whose last message is one of ``msgkeys`` (both sides)."""
    if not msgkeys:
        return set()
    sends = ClientMessage.objects.filter(msgkey__in=msgkeys)
    q = Q(pk__in=[])
    for msgkey, sender, receiver in sends.values_list("msgkey", "sender_uid", "receiver_uid"):
        sides = Q(owner_uid=sender, peer_uid=receiver) | Q(owner_uid=receiver, peer_uid=sender)
        q |= sides & Q(last_msgkey=msgkey)
    rows = Conversation.objects.filter(q).values_list("owner_uid", "peer_uid")
    return {(int(o), int(p)) for o, p in rows}
