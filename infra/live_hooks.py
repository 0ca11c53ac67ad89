"""How domain apps hand a change to a user's online devices without importing the app that
delivers it (the dependency points down: messaging and bulk call this module, ``live`` registers
itself here in ``LiveConfig.ready``).

An event is a JSON-ready dict: a frame of the live protocol without its ``cursor`` (docs/live.md),
e.g. ``{"type": "read", "conversation": {"kind": "direct", "peer_uid": "42"}, "read_upto": "…",
"unread": 0}``. ``push_many(uids, event)`` hands one event for many users to every registered
sink; the plural comes first (a campaign batch is one call; ``push_all`` hands several events
at once), ``push`` is one user's wrapper;
``push_group(gid, event)`` is for a group's members, resolved off the sender's path.

Callers push only after their change is committed (the REST API is the truth a device re-reads
on ``resync``). A sink never raises into the caller: live delivery rides on top of the stores,
and a send or a batch never fails because a push could not be made. With no sink registered (a
process without the ``live`` app) a push does nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Event = dict[str, Any]
# An event, or what builds it: called only when one of the users is recently online (a
# campaign batch nobody watches never loads its message's body).
Lazy = Event | Callable[[], Event]
Sink = Callable[[Sequence[tuple[Sequence[int], Lazy]]], None]  # (users, event) pairs, in one go
GroupSink = Callable[[int, Event], None]
_SINKS: list[Sink] = []
_GROUP_SINKS: list[GroupSink] = []


def register(sink: Sink, group_sink: GroupSink) -> None:
    """Add the sinks once (``AppConfig.ready`` may run twice in tests)."""
    if sink not in _SINKS:
        _SINKS.append(sink)
    if group_sink not in _GROUP_SINKS:
        _GROUP_SINKS.append(group_sink)


def push_many(uids: Sequence[int], event: Lazy) -> None:
    push_all([(uids, event)])


def push_all(items: Sequence[tuple[Sequence[int], Lazy]]) -> None:
    """Several events, each for some users, handed on in one go (a sink may write them in one
    round trip: a 1:1 message's two, the receiver's and the sender's other devices')."""
    wanted = [(uids, event) for uids, event in items if uids]
    if not wanted:
        return
    for sink in _SINKS:
        sink(wanted)


def push(uid: int, event: Lazy) -> None:
    push_many([uid], event)


def push_group(gid: int, event: Event) -> None:
    """One event to a group's current members: the sink hands it on (a task), so a send stays
    O(1) in the group's size; only the members recently online cost anything there."""
    for sink in _GROUP_SINKS:
        sink(gid, event)


def direct(peer_uid: int) -> dict[str, str]:
    """The ``conversation`` of a 1:1 frame."""
    return {"kind": "direct", "peer_uid": str(peer_uid)}


def group(gid: int) -> dict[str, str]:
    """The ``conversation`` of a group frame."""
    return {"kind": "group", "gid": str(gid)}
