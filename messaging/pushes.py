"""What messaging hands to live delivery: the frames of its changes (docs/live.md), pushed
through ``infra.live_hooks`` after each change is committed. Messaging never imports the app
that delivers them.

- ``message_sent``: a 1:1 message, to the receiver (conversation: the sender) and to the
  sender's devices (conversation: the receiver), the sender's other devices included.
- ``campaign_batch``: a campaign's message to a batch's recipients. Only the recently online
  among them cost anything (one Redis call for the whole batch); the message's body is loaded
  from the database only when one of them is, once per campaign per process.
- ``group_sent``: a group message to the group's current members, resolved off the send's path
  (``infra.live_hooks.push_group``: the send stays O(1) in the group's size).
- ``copies_recalled`` (a 1:1 message's copies, a campaign batch's), ``deleted``, ``read_moved``,
  and their group forms.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from api.fields import utc_timestamp
from infra import live_hooks
from infra.live_hooks import Event, direct, group
from messaging.models import Message, MessageStatus
from storage import msgkey as keys
from storage.inbox import InboxEntry

CAMPAIGNS_KEPT = 256


def message_item(message: Message, **extra: Any) -> dict[str, Any]:
    """A message as history shows it (ids as strings; no content once recalled)."""
    recalled = message.status == MessageStatus.RECALLED
    return {
        "msgkey": str(message.msgkey),
        "sender_uid": str(message.sender_uid),
        "content": None if recalled else {**message.body},
        "created_at": utc_timestamp(keys.created_at(message.msgkey)),
        "status": "recalled" if recalled else "normal",
        **extra,
    }


def _message(conversation: dict[str, str], item: dict[str, Any]) -> Event:
    return {"type": "message", "conversation": conversation, "message": item}


def message_sent(message: Message, receiver_uid: int) -> None:
    item = message_item(message)
    live_hooks.push_all(  # both in one round trip
        [
            ([receiver_uid], _message(direct(message.sender_uid), item)),
            ([message.sender_uid], _message(direct(receiver_uid), item)),
        ]
    )


def campaign_batch(*, sender_uid: int, msgkey: int, receiver_uids: Sequence[int]) -> None:
    live_hooks.push_many(receiver_uids, _campaign_event(sender_uid, msgkey))


def _campaign_event(sender_uid: int, msgkey: int) -> Event | Callable[[], Event]:
    """The event when this process has the body already; else what loads it, called only when
    a recipient is recently online (a batch nobody watches costs no query)."""
    item = _items.get(msgkey)
    if item is not None:
        return _message(direct(sender_uid), item)
    return lambda: _message(direct(sender_uid), _campaign_item(msgkey))


_items: dict[int, dict[str, Any]] = {}  # msgkey -> item: the campaigns this process delivers


def _campaign_item(msgkey: int) -> dict[str, Any]:
    if len(_items) >= CAMPAIGNS_KEPT:
        _items.clear()
    item = _items[msgkey] = message_item(Message.objects.get(msgkey=msgkey))
    return item


def copies_recalled(copies: Sequence[InboxEntry]) -> None:
    """Recalled copies (a 1:1 message's two, a campaign batch's): each owner's devices hear of it
    in the conversation the copy sits in; one call per peer."""
    by_peer: dict[int, list[int]] = {}
    for copy in copies:
        by_peer.setdefault(copy.peer, []).append(copy.owner)
    for peer, owners in by_peer.items():
        msgkey = str(copies[0].msgkey)
        live_hooks.push_many(
            owners, {"type": "recall", "conversation": direct(peer), "msgkey": msgkey}
        )


def deleted(*, owner_uid: int, peer_uid: int, msgkey: int) -> None:
    event = {"type": "delete", "conversation": direct(peer_uid), "msgkey": str(msgkey)}
    live_hooks.push(owner_uid, event)


def read_moved(*, owner_uid: int, peer_uid: int, read_upto: int, unread: int) -> None:
    event = {"type": "read", "conversation": direct(peer_uid), "read_upto": str(read_upto)}
    live_hooks.push(owner_uid, {**event, "unread": unread})


# -- groups --------------------------------------------------------------------------------------
def group_sent(*, gid: int, seq: int, message: Message) -> None:
    live_hooks.push_group(gid, _message(group(gid), message_item(message, seq=seq)))


def group_recalled(*, gid: int, seq: int, msgkey: int) -> None:
    event = {"type": "recall", "conversation": group(gid), "msgkey": str(msgkey), "seq": seq}
    live_hooks.push_group(gid, event)


def group_deleted(*, uid: int, gid: int, seq: int, msgkey: int) -> None:
    event = {"type": "delete", "conversation": group(gid), "msgkey": str(msgkey), "seq": seq}
    live_hooks.push(uid, event)


def group_read_moved(*, uid: int, gid: int, read_seq: int, unread: int) -> None:
    event = {"type": "read", "conversation": group(gid), "read_upto": str(read_seq)}
    live_hooks.push(uid, {**event, "unread": unread})
