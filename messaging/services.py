"""Messaging actions: send, recall, read, delete, block, follow.

Plural first: ``deliver_many`` writes one message into many timelines (inbox rows, conversations,
unread counters, delivery events); a 1:1 send is that fan-out with the sender's own copy added.
Every step is idempotent, so a retried send (same sender and client_msg_id) re-runs the fan-out
to finish a delivery an earlier attempt left half done, and changes nothing otherwise.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Case, Model, Q, QuerySet, Value, When
from django.utils import timezone

from api.auth import ApiPrincipal
from api.errors import Blocked, Conflict, Forbidden, InvalidInput, NotFound
from api.models import Scope
from infra import stages
from infra.redis import get_redis
from infra.taskref import TaskRef
from messaging import pushes
from messaging.conversations import (
    ConversationTouch,
    conversations_bump_many,
    conversations_touch_many,
    conversations_touch_owners,
    read_positions,
)
from messaging.models import (
    Account,
    Block,
    Category,
    ClientMessage,
    Conversation,
    Follow,
    Message,
    MessageStatus,
)
from messaging.selectors import send_facts
from storage import msgkey as keys
from storage.content import validate_content
from storage.convcache import held, prewarm
from storage.convcache import writer as convcache
from storage.counters import keys as counter_keys
from storage.counters import lua as counters
from storage.counters.store import (
    Marker,
    unread_add,
    unread_clear_all,
    unread_incr_many,
    unread_set,
)
from storage.events import publish_deliveries, publish_into, publish_later, unpublished
from storage.inbox import InboxEntry, get_inbox
from storage.inbox.base import FLAG_RECALLED, RECEIVED, SENT

Row = TypeVar("Row", bound=Model)
RECALL_WINDOW = timedelta(minutes=2)
# A send whose delivery has not finished this long after its content was stored was interrupted
# (an outage, a killed process): the sweep finishes it. A live send takes milliseconds.
STALLED_SEND_S = 30.0
log = logging.getLogger(__name__)
# Messages that reach timelines by another route (a campaign's batches) are recalled there too:
# the owner of the route registers its fan-out from its AppConfig.ready (bulk.apps). Each must be
# idempotent; it runs on every recall.
_RECALL_FANOUTS: list[Callable[[Message], object]] = []


# The same routes show a message's content in their conversations (a campaign's recipients'):
# a change made in SQL, behind the application's back, reaches them through this (bulk.apps).
_CHANGE_FANOUTS: list[Callable[[Message], object]] = []
# A recall the application made is marked this long (``messages_changed_outside``): the binlog
# follower, which sees its status change within a second, then leaves it to the application.
RECALL_MARK_S = 3600


def register_recall_fanout(fanout: Callable[[Message], object]) -> None:
    """Recall ``message`` from another route too, on every recall (registered once)."""
    if fanout not in _RECALL_FANOUTS:
        _RECALL_FANOUTS.append(fanout)


def register_change_fanout(fanout: Callable[[Message], object]) -> None:
    """Show a change of ``message`` made in SQL on another route too (registered once)."""
    if fanout not in _CHANGE_FANOUTS:
        _CHANGE_FANOUTS.append(fanout)


@dataclass(frozen=True)
class SendResult:
    message: Message
    receiver_uid: int
    created: bool


# -- categories --------------------------------------------------------------------------------
def pair_categories(sender_uid: int, receiver_uid: int) -> tuple[str, str]:
    """(what the receiver files the sender under, what the sender files the receiver under): a
    business or system account's kind first, else followed or stranger. One read of both
    accounts and, unless both have a kind, one of the follows both ways (a 1:1 send made four
    reads, two a side, one after another: MariaDB's general log of a send). A new 1:1 send reads
    the same facts with its other checks in one round trip (``selectors.send_facts``)."""
    kinds = dict(
        Account.objects.filter(uid__in=(sender_uid, receiver_uid)).values_list("uid", "kind")
    )
    follows: set[tuple[int, int]] = set()
    if not (kinds.get(sender_uid) and kinds.get(receiver_uid)):
        both_ways = Q(follower_uid=receiver_uid, followee_uid=sender_uid) | Q(
            follower_uid=sender_uid, followee_uid=receiver_uid
        )
        follows = set(Follow.objects.filter(both_ways).values_list("follower_uid", "followee_uid"))
    return categories_of(sender_uid, receiver_uid, kinds, follows)


def categories_of(
    sender_uid: int, receiver_uid: int, kinds: dict[int, str], follows: set[tuple[int, int]]
) -> tuple[str, str]:
    """``pair_categories`` from the two accounts' ``kinds`` and the ``follows`` between them."""

    def filed(owner: int, peer: int) -> str:
        followed = (owner, peer) in follows
        return kinds.get(peer) or (Category.FOLLOWED if followed else Category.STRANGER)

    return filed(receiver_uid, sender_uid), filed(sender_uid, receiver_uid)


# -- fan-out -----------------------------------------------------------------------------------
def deliver_many(
    *,
    sender_uid: int,
    receiver_uids: Sequence[int],
    msgkey: int,
    category: str,
    marker: Marker,
    with_outbox: bool = False,
    sender_category: str | None = None,
) -> None:
    """Write ``msgkey`` into every receiver's timeline (and the sender's, for 1:1)."""
    # stages.lap: a bulk batch's per-stage profile (bulk/profile.py); nothing when none is open
    if with_outbox:
        _write_with_outbox(sender_uid, receiver_uids, msgkey, category, sender_category)
    else:  # a bulk batch: rows built from the owners, no object per receiver
        with transaction.atomic():  # one commit for the rows and the conversations
            get_inbox().add_received(receiver_uids, sender_uid, msgkey)
            stages.lap("inbox write")
            conversations_touch_owners(receiver_uids, sender_uid, category, msgkey, keys.now_ms())
        stages.lap("conversation upsert")
        convcache.refresh_owners(receiver_uids, sender_uid, delivered=len(receiver_uids))
    stages.lap("conversation-list cache")
    pipe = get_redis().pipeline(transaction=False)  # counters and events: one round trip
    unread_incr_many(
        owner_uids=receiver_uids,
        peer_uid=sender_uid,
        category=category,
        marker=marker,
        client=pipe,
        msgkey=msgkey,
    )
    stages.lap("unread")
    events = publish_into(pipe, receiver_uids=receiver_uids, peer_uid=sender_uid, msgkey=msgkey)
    stages.lap("events")
    failed = unpublished(pipe.execute(raise_on_error=False), events)
    stages.lap("unread + events round trip")
    if failed is not None:
        if not with_outbox:  # a campaign batch waits for the stores; its retry publishes them
            raise failed
        args = (list(receiver_uids), sender_uid, msgkey)
        publish_later(failed, EVENTS_TASK, args, kind="direct")  # the send is accepted
    if not with_outbox:  # a campaign batch: online recipients only, nothing when none is online
        pushes.campaign_batch(sender_uid=sender_uid, msgkey=msgkey, receiver_uids=receiver_uids)


EVENTS_TASK = TaskRef()  # messaging/tasks.py events_publish, bound by MessagingConfig.ready


def events_publish(*, receiver_uids: Sequence[int], peer_uid: int, msgkey: int) -> None:
    """Publish the delivery events a send could not (storage/events.py ``publish_later``)."""
    publish_deliveries(receiver_uids=receiver_uids, peer_uid=peer_uid, msgkey=msgkey)


def _write_with_outbox(
    sender_uid: int,
    receiver_uids: Sequence[int],
    msgkey: int,
    category: str,
    sender_category: str | None,
) -> None:
    """Both sides' rows and conversations (a 1:1 send), then their cache push."""
    entries = [InboxEntry(r, sender_uid, msgkey, RECEIVED) for r in receiver_uids]
    entries += [InboxEntry(sender_uid, r, msgkey, SENT) for r in receiver_uids]
    side = sender_category or Category.STRANGER
    touches = [ConversationTouch(r, sender_uid, category, msgkey) for r in receiver_uids]
    touches += [ConversationTouch(sender_uid, r, side, msgkey) for r in receiver_uids]
    with transaction.atomic():
        get_inbox().add_many(entries)
        conversations_touch_many(touches, keys.now_ms())
    convcache.refresh([(t.owner, t.peer) for t in touches], delivered=len(receiver_uids))


# -- 1:1 send ------------------------------------------------------------------------------------
def _digest(receiver_uid: int, content: dict[str, Any]) -> str:
    canonical = json.dumps([receiver_uid, content], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def message_send(
    *, sender_uid: int, receiver_uid: int, content: Any, client_msg_id: str
) -> SendResult:
    body = validate_content(content)
    if sender_uid == receiver_uid:
        raise InvalidInput("A user cannot message themselves.", {"receiver_uid": "is the sender"})
    digest = _digest(receiver_uid, body)
    facts = send_facts(sender_uid, receiver_uid, client_msg_id)
    existing = facts.sent
    if existing is None:
        if facts.blocked:
            raise Blocked("The receiver has blocked this sender.")
        new = NewSend(sender_uid, receiver_uid, body, client_msg_id, digest)
        categories = categories_of(sender_uid, receiver_uid, facts.kinds, facts.follows)
        sent = _send_new_or_winner(new, categories)
        if isinstance(sent, SendResult):
            return sent
        existing = sent
    return _replay(existing, digest)


@dataclass(frozen=True)
class NewSend:
    sender_uid: int
    receiver_uid: int
    body: dict[str, Any]
    client_msg_id: str
    digest: str


def _client_message(sender_uid: int, client_msg_id: str) -> ClientMessage | None:
    return ClientMessage.objects.filter(sender_uid=sender_uid, client_msg_id=client_msg_id).first()


SEND_CLASHES = 3  # unique-key clashes a send survives without finding the send that won


def _send_new_or_winner(new: NewSend, categories: tuple[str, str]) -> SendResult | ClientMessage:
    """Store a new send, or return the concurrent retry's send that won the race for its
    ``client_msg_id``. A unique clash that left no such send behind (seen once, in a clean-clone
    run of the four-thread retry test: IntegrityError, then no row; its cause not found) is
    stored again with a fresh msgkey, logged, instead of answering 500."""
    for attempt in range(1, SEND_CLASHES + 1):
        try:
            return _send_new(new, categories)
        except IntegrityError as exc:
            winner = _client_message(new.sender_uid, new.client_msg_id)
            if winner is not None:
                return winner
            if attempt == SEND_CLASHES:
                raise
            log.warning("message_send: a unique clash left no send behind (%s); again", exc)
    raise AssertionError("unreachable")


def message_store(*, sender_uid: int, body: dict[str, Any], msgkey: int | None = None) -> Message:
    """Store validated content once, under a new msgkey (1:1 sends, campaigns)."""
    key = msgkey or keys.next_msgkey()
    return Message.objects.create(
        msgkey=key,
        sender_uid=sender_uid,
        type=body["type"],
        body=body,
        created_at=keys.created_at(key),
    )


def _send_new(new: NewSend, categories: tuple[str, str]) -> SendResult:
    msgkey = keys.next_msgkey()
    with transaction.atomic():
        ClientMessage.objects.create(
            sender_uid=new.sender_uid,
            client_msg_id=new.client_msg_id,
            msgkey=msgkey,
            receiver_uid=new.receiver_uid,
            digest=new.digest,
        )
        message = message_store(sender_uid=new.sender_uid, body=new.body, msgkey=msgkey)
    _deliver(message, new.receiver_uid, categories)
    return SendResult(message, new.receiver_uid, created=True)


def _replay(existing: ClientMessage, digest: str) -> SendResult:
    """A retry: finish the fan-out only if the first attempt died before it was done, so a
    replay never brings back a copy the receiver deleted or un-recalls a recalled message."""
    if existing.digest != digest:
        raise Conflict("client_msg_id was already used for a different message.")
    message = Message.objects.get(msgkey=existing.msgkey)
    if not existing.delivered and message.status != MessageStatus.RECALLED:
        _deliver_one(message, existing.receiver_uid)  # idempotent steps
    return SendResult(message, existing.receiver_uid, created=False)


def sends_complete_stalled(*, older_than_s: float = STALLED_SEND_S, limit: int = 500) -> int:
    """Finish 1:1 sends whose delivery an outage or a crash interrupted after the content was
    stored, without waiting for the client to retry (the beat task ``messaging.sends_complete``).
    Each is finished exactly as a retry would (``_replay``); returns how many were.

    Every stalled send is visited, ``limit`` rows a query in msgkey order, so sends that cannot
    be finished now never hold back later ones; one that fails is logged and left for the next
    pass, the others go on. One recalled meanwhile, or whose content is gone, is finished as it
    is: marked delivered, nothing delivered (the recall removed or will remove its copies)."""
    before = keys.lower_bound(timezone.now() - timedelta(seconds=older_than_s))
    stalled = ClientMessage.objects.filter(delivered=False, msgkey__lt=before)
    return finish_in_pages(stalled, _complete_stalled, limit)


def finish_in_pages(rows: QuerySet[Row], finish: Callable[[Row], int], limit: int) -> int:
    """``finish`` every row of ``rows`` (rows with a ``msgkey``), ``limit`` a query in msgkey
    order, each page after the last one's msgkey; returns the sum of what ``finish`` returned
    (1 for a row finished, 0 for one left for the next pass). The stalled-send sweeps of 1:1
    and group sends."""
    done, after = 0, 0
    while True:
        page = list(rows.filter(msgkey__gt=after).order_by("msgkey")[:limit])
        done += sum(finish(row) for row in page)
        if len(page) < limit:
            return done
        after = int(page[-1].serializable_value("msgkey"))


def _complete_stalled(sent: ClientMessage) -> int:
    """1 once ``sent`` is finished, 0 when it failed (left for the next pass)."""
    try:
        message = Message.objects.filter(msgkey=sent.msgkey).first()
        if message is None or message.status == MessageStatus.RECALLED:
            ClientMessage.objects.filter(pk=sent.pk).update(delivered=True)
        else:
            _deliver_one(message, sent.receiver_uid)  # idempotent steps
    except Exception:
        log.warning("messaging: stalled send %s left for the next pass", sent.msgkey, exc_info=True)
        return 0
    return 1


def _deliver_one(message: Message, receiver_uid: int) -> None:
    _deliver(message, receiver_uid, pair_categories(message.sender_uid, receiver_uid))


def _deliver(message: Message, receiver_uid: int, categories: tuple[str, str]) -> None:
    category, sender_category = categories
    deliver_many(
        sender_uid=message.sender_uid,
        receiver_uids=[receiver_uid],
        msgkey=message.msgkey,
        category=category,
        marker=f"m:{message.msgkey}",
        with_outbox=True,
        sender_category=sender_category,
    )
    ClientMessage.objects.filter(msgkey=message.msgkey).update(delivered=True)
    pushes.message_sent(message, receiver_uid)


# -- recall --------------------------------------------------------------------------------------
def message_recall(*, msgkey: int, actor_uid: int | None, operator: bool = False) -> Message:
    message = Message.objects.filter(msgkey=msgkey).first()
    if message is None:
        raise NotFound("No such message.")
    if not operator:
        if actor_uid != message.sender_uid:
            raise Forbidden("Only the sender (or an operator) can recall a message.")
        if timezone.now() - message.created_at > RECALL_WINDOW:
            raise Forbidden("The recall window (2 minutes) has passed.")
    if message.status != MessageStatus.RECALLED:
        get_redis().set(_recall_mark(msgkey), 1, ex=RECALL_MARK_S)  # before the binlog shows it
        Message.objects.filter(msgkey=msgkey).update(status=MessageStatus.RECALLED)
        message.status = MessageStatus.RECALLED
    _recall_routes(message)
    return message


def _recall_routes(message: Message) -> None:
    # Every step is idempotent, so recalling again finishes what an interrupted call left.
    for sent in ClientMessage.objects.filter(msgkey=message.msgkey):
        _recall_copies(message, sent.receiver_uid)
    for fanout in _RECALL_FANOUTS:
        fanout(message)


def _recall_mark(msgkey: int) -> str:
    return f"recall:made:{msgkey}"


def messages_changed_outside(changed: Sequence[int], recalled: Sequence[int]) -> int:
    """Messages whose content or status an UPDATE in SQL changed, behind the application's back
    (the binlog follower; ``recalled``: those whose status became recalled there). Such a recall
    is finished as the application finishes its own: every route's copies flagged and counted
    down in unread, their conversations bumped; unless the application made it (marked for
    RECALL_MARK_S), whose own call runs those steps already. Any other change reaches the
    conversations of the routes that registered a change fan-out (a campaign's recipients); the
    1:1 conversations showing it are the caller's to bump. Returns how many recalls it finished."""
    if not changed:
        return 0
    ours, recalled_here = _recalls_made_here(recalled), set(recalled)
    finished = 0
    for message in Message.objects.filter(msgkey__in=list(changed)).order_by("msgkey"):
        if message.msgkey in ours:
            continue
        if message.msgkey in recalled_here and message.status == MessageStatus.RECALLED:
            _recall_routes(message)
            finished += 1
        else:
            for fanout in _CHANGE_FANOUTS:
                fanout(message)
    return finished


def _recalls_made_here(msgkeys: Sequence[int]) -> set[int]:
    """Those of ``msgkeys`` whose recall the application made (``message_recall``'s mark)."""
    if not msgkeys:
        return set()
    pipe = get_redis().pipeline(transaction=False)
    for msgkey in msgkeys:
        pipe.exists(_recall_mark(msgkey))
    return {m for m, made in zip(msgkeys, pipe.execute(), strict=True) if made}


def message_recall_for_client(*, principal: ApiPrincipal, msgkey: int) -> Message:
    """An operator client recalls anything; a ``users`` client any user's messages; a ``send`` or
    ``campaigns`` client its own senders' messages (a 1:1 message, or a campaign's: then every
    recipient's copy), within the window.

    Another client's messages answer 404, like messages that do not exist.
    """
    if principal.is_operator:
        return message_recall(msgkey=msgkey, actor_uid=None, operator=True)
    if not {Scope.SEND, Scope.CAMPAIGNS, Scope.USERS} & set(principal.scopes):
        raise Forbidden(
            "Recall needs the 'send', 'campaigns' or 'users' scope, or an operator client."
        )
    sender = Message.objects.filter(msgkey=msgkey).values_list("sender_uid", flat=True).first()
    if sender is None or not (principal.acts_for_users or principal.owns_sender(sender)):
        raise NotFound("No such message.")
    return message_recall(msgkey=msgkey, actor_uid=sender)


def _recall_copies(message: Message, receiver_uid: int) -> None:
    """Both sides' copies of a 1:1 message."""
    inbox = get_inbox()
    sides = ((receiver_uid, message.sender_uid), (message.sender_uid, receiver_uid))
    copies = [e for o, p in sides if (e := inbox.get(o, p, message.msgkey)) is not None]
    copies_recall_many(
        copies, sender_uid=message.sender_uid, msgkey=message.msgkey, marker=f"r:{message.msgkey}"
    )


def copies_recall_many(
    copies: Sequence[InboxEntry], *, sender_uid: int, msgkey: int, marker: Marker
) -> list[InboxEntry]:
    """Recall copies of one message from their owners' timelines, exactly once: the unread ones
    are counted down (before the flags, under ``marker``: a retry after a crash between the two
    still sees them unflagged, and the marker keeps them from being counted twice), every copy is
    flagged recalled and every conversation bumped so every cache tier shows the recall (all of
    them, flagged before or not: a retry after a crash between the flags and the bump bumps them).
    The one recall step of a 1:1 message (its two copies) and of a campaign's (a batch's
    recipients). Their owners' online devices hear of it. Returns the copies it flagged (those not
    flagged before)."""
    live = [c for c in copies if not c.flags & FLAG_RECALLED]
    _count_down(live, sender_uid, msgkey, marker)
    get_inbox().recall_many(live)
    conversations_bump([(c.owner, c.peer) for c in copies])
    pushes.copies_recalled(live)
    return live


def _count_down(copies: Sequence[InboxEntry], sender_uid: int, msgkey: int, marker: Marker) -> None:
    """Unread copies (received, past their owner's read position) down by one, per category."""
    owners = [c.owner for c in copies if c.counts_as_unread]
    positions = read_positions(owners, sender_uid)
    by_category: dict[str, list[int]] = {}
    for owner in owners:
        read_upto, category = positions.get(owner, (msgkey, ""))  # no conversation: never counted
        if msgkey > read_upto:
            by_category.setdefault(category, []).append(owner)
    for category, uids in by_category.items():
        unread_incr_many(
            owner_uids=uids, peer_uid=sender_uid, category=category, marker=marker, delta=-1
        )


def conversations_bump(pairs: Sequence[tuple[int, int]]) -> None:
    """A change the conversations' rows do not show (a recalled message): bump their ``mtime``
    and push them to the cache tiers."""
    conversations_bump_many(pairs, keys.now_ms())
    convcache.refresh(pairs)


def conversations_showing_bump(owner_uids: Sequence[int], peer_uid: int, msgkey: int) -> int:
    """Bump the conversations of ``owner_uids`` with ``peer_uid`` whose last message is
    ``msgkey`` (its content changed: their previews did); returns how many."""
    showing = Conversation.objects.filter(
        owner_uid__in=list(owner_uids), peer_uid=peer_uid, last_msgkey=msgkey
    )
    pairs = [(int(o), peer_uid) for o in showing.values_list("owner_uid", flat=True)]
    if pairs:
        conversations_bump(pairs)
    return len(pairs)


# -- read position --------------------------------------------------------------------------------
def conversation_get(owner_uid: int, peer_uid: int) -> Conversation:
    conv = Conversation.objects.filter(owner_uid=owner_uid, peer_uid=peer_uid).first()
    if conv is None:
        raise NotFound("No such conversation.")
    return conv


def conversation_mark_read(*, owner_uid: int, peer_uid: int, upto_msgkey: int | None = None) -> int:
    """Move the read position; returns the conversation's unread count after it."""
    conv = conversation_get(owner_uid, peer_uid)
    # Never past the newest message: a read position in the future would hide later messages
    # from unread (the rebuild, recall and delete all compare msgkeys with it).
    upto = conv.last_msgkey if upto_msgkey is None else min(upto_msgkey, conv.last_msgkey)
    last, now = conv.last_msgkey, keys.now_ms()
    remaining = 0 if upto >= last else get_inbox().count_after(owner_uid, peer_uid, upto, last)
    Conversation.objects.filter(pk=conv.pk).update(read_upto=upto, mtime=max(conv.mtime + 1, now))
    convcache.refresh([(owner_uid, peer_uid)])
    unread_set(owner_uid=owner_uid, peer_uid=peer_uid, category=conv.category, count=remaining)
    pushes.read_moved(owner_uid=owner_uid, peer_uid=peer_uid, read_upto=upto, unread=remaining)
    return remaining


# -- one-sided deletes -----------------------------------------------------------------------------
def message_delete(*, owner_uid: int, peer_uid: int, msgkey: int) -> None:
    conv = conversation_get(owner_uid, peer_uid)
    inbox = get_inbox()
    entry = inbox.get(owner_uid, peer_uid, msgkey)
    if entry is None:
        raise NotFound("No such message in this conversation.")
    inbox.remove(owner_uid, peer_uid, [msgkey])
    if entry.counts_as_unread and msgkey > conv.read_upto:
        unread_add(owner_uid=owner_uid, peer_uid=peer_uid, category=conv.category, delta=-1)
    if msgkey == conv.last_msgkey:
        conversations_settle([conv])
    pushes.deleted(owner_uid=owner_uid, peer_uid=peer_uid, msgkey=msgkey)


def conversation_delete(*, owner_uid: int, peer_uid: int) -> None:
    conv = conversation_get(owner_uid, peer_uid)
    get_inbox().remove_conversation(owner_uid, peer_uid)
    unread_set(owner_uid=owner_uid, peer_uid=peer_uid, category=conv.category, count=0)
    conv.delete()
    convcache.forget(owner_uid, peer_uid, max(conv.mtime + 1, keys.now_ms()))


def messages_delete_all(*, owner_uid: int) -> int:
    """Delete everything ``owner_uid`` holds; returns how many conversations went."""
    get_inbox().remove_all(owner_uid)
    deleted, _ = Conversation.objects.filter(owner_uid=owner_uid).delete()
    convcache.invalidate(owner_uid)
    unread_clear_all(owner_uid=owner_uid)
    return deleted


# -- blocks and follows ----------------------------------------------------------------------------
def block_set(*, owner_uid: int, blocked_uid: int, blocked: bool) -> None:
    if owner_uid == blocked_uid:
        raise InvalidInput("A user cannot block themselves.", {"peer_uid": "is the user"})
    if blocked:
        Block.objects.get_or_create(owner_uid=owner_uid, blocked_uid=blocked_uid)
    else:
        Block.objects.filter(owner_uid=owner_uid, blocked_uid=blocked_uid).delete()


# -- for the unread answer (unread/) -----------------------------------------------------------
def conversation_list_prewarm(owner_uid: int) -> bool:
    """A user asked for their unread counts: a big UP's conversation list is built before they
    open it (once per window; an ordinary user costs no round trip). True: this call started it."""
    return prewarm.on_unread_request(owner_uid)


# -- for retention (retention/) ---------------------------------------------------------------
def conversations_refresh(pairs: Sequence[tuple[int, int]]) -> None:
    """Push these conversations' current rows into the cache tiers: another app changed them
    (retention moved their last message back to the newest one left)."""
    convcache.refresh(pairs)


def conversations_forget(gone: Sequence[tuple[int, int, int]]) -> None:
    """Another app deleted these conversations' rows (everything in them aged out, or a change
    made in MySQL directly): each cached entry goes, as a tombstone of its version (owner, peer,
    version above the row's last ``mtime``)."""
    convcache.forget_many(gone)


# -- conversations whose last message went (a one-sided delete, retention) ----------------
MOVE_CHUNK = 1000  # conversations per UPDATE that points them at their newest remaining message


def conversations_settle(convs: Sequence[Conversation]) -> Counter[str]:
    """Conversations whose last message went: each shows its newest remaining message, or
    goes when none is left: a one-sided delete of the last message, retention ageing messages
    out. Guarded by the last msgkey read: a conversation a new message reached meanwhile is left
    as it is."""
    newest = _newest(convs)
    staying = [c for c in convs if c.pk in newest]
    moved = [
        pair
        for start in range(0, len(staying), MOVE_CHUNK)
        for pair in _conversations_move(staying[start : start + MOVE_CHUNK], newest)
    ]
    conversations_refresh(moved)
    gone = conversations_drop([c for c in convs if c.pk not in newest])
    return Counter(conversations_moved=len(moved), conversations_removed=gone)


def _conversations_move(
    convs: Sequence[Conversation], newest: dict[int, int]
) -> list[tuple[int, int]]:
    """Point each conversation at its newest remaining message (a new version of each), in one
    locked read and one UPDATE for all: those a new message reached meanwhile (last msgkey no
    longer the one read) are left as they are. One UPDATE per conversation aged out 4,200
    copies a second when 30% of the conversations moved (scripts/bench_retention.py)."""
    now, read = keys.now_ms(), {c.pk: c for c in convs}
    with transaction.atomic():
        found = Conversation.objects.select_for_update().filter(pk__in=list(read))
        still = [
            pk
            for pk, last in found.values_list("pk", "last_msgkey")
            if read[pk].last_msgkey == last
        ]
        if still:
            key = Case(*(When(pk=pk, then=Value(newest[pk])) for pk in still))
            version = Case(*(When(pk=pk, then=Value(max(read[pk].mtime + 1, now))) for pk in still))
            Conversation.objects.filter(pk__in=still).update(
                last_msgkey=key, sort_key=key, mtime=version
            )
    return [(read[pk].owner_uid, read[pk].peer_uid) for pk in still]


def _newest(convs: Sequence[Conversation]) -> dict[int, int]:
    """conversation pk -> the newest msgkey its owner still holds from its peer, read for all
    the owners of one peer at once (a campaign batch's: one peer)."""
    by_peer: dict[int, list[Conversation]] = {}
    for conv in convs:
        by_peer.setdefault(conv.peer_uid, []).append(conv)
    newest: dict[int, int] = {}
    for peer, group in by_peer.items():
        keys = get_inbox().newest_many([c.owner_uid for c in group], peer)
        newest.update((c.pk, keys[c.owner_uid]) for c in group if c.owner_uid in keys)
    return newest


def conversations_drop(convs: Sequence[Conversation]) -> int:
    """Conversations with nothing left: the rows, their unread counts and their cached entries go
    (``conversation_delete``'s steps for many at once: one locked read and one DELETE, one Redis
    round trip, one cache probe). A row whose last msgkey moved since it was
    read (a new message reached it) is left as it is."""
    if not convs:
        return 0
    with transaction.atomic():
        rows = Conversation.objects.select_for_update().filter(pk__in=[c.pk for c in convs])
        now = dict(rows.values_list("pk", "last_msgkey"))
        gone = [c for c in convs if now.get(c.pk) == c.last_msgkey]
        Conversation.objects.filter(pk__in=[c.pk for c in gone]).delete()
    pipe = get_redis().pipeline(transaction=False)
    for conv in gone:
        args = [conv.peer_uid, conv.category, "set", 0]
        counters.call("adjust", [counter_keys.unread(conv.owner_uid)], args, client=pipe)
    pipe.execute()
    stamp = keys.now_ms()
    conversations_forget([(c.owner_uid, c.peer_uid, max(c.mtime + 1, stamp)) for c in gone])
    return len(gone)


# -- for the binlog follower (cachesync/) -----------------------------------------------------
def conversations_unheld(versions: Mapping[tuple[int, int], int]) -> list[tuple[int, int]]:
    """Of these conversations, each with the ``mtime`` of a row the binlog showed, those some
    cache tier may still lack (the rest the application's write-through pushed already; one
    Redis pipeline and one HBase connection for all of them: convcache/held.py)."""
    return held.unheld(versions)


# ``with caches_strict():`` a cache push made inside (``conversations_refresh``,
# ``conversations_forget``, ``conversations_bump``) that a tier missed, with nothing made up for
# it (no drop, no dirty mark), raises ``CachePushFailed`` instead of carrying on: the follower
# waits and applies the same change again (storage/convcache/writer.py, ``strict``).
caches_strict = convcache.strict
CachePushFailed = convcache.PushFailed
