"""Every Redis key and channel-layer group name of live delivery (one user's keys share the hash
tag ``{u:<uid>}``, so each Lua call touches one Redis Cluster slot).

- ``live:{u:<uid>}:seen``  string, TTL ``LIVE_RESUME_WINDOW_S``: the user was online within the
  window ("recently online"); only such users get log entries. Set on connect, on every
  heartbeat and on disconnect.
- ``live:{u:<uid>}:dev``   ZSET device_id -> ms until which the device counts as connected
  (refreshed by heartbeats: a gateway that died leaves entries that simply expire).
- ``live:{u:<uid>}:at``    HASH device_id -> ms the device's current connection opened.
- ``live:{u:<uid>}:meta``  HASH ``epoch`` (random, new whenever the log starts afresh: a Redis that
  lost the log cannot be mistaken for the same one), ``pos`` (the last position written),
  ``run`` (INFO's run_id of the Redis that wrote it), and after a restart ``prev`` (the epoch
  before it) and ``floor`` (the last position that survived it: the same log goes on after it).
- ``live:{u:<uid>}:log``   STREAM of events, entry id ``0-<pos>``, fields ``e`` (the frame
  without its cursor, JSON) and ``ms``; exact MAXLEN ``LIVE_LOG_MAXLEN``.
- ``live:{parked}:group_pushes``  LIST of ``{"gid", "event"}`` (JSON): group pushes the broker did
  not take, oldest first, at most ``PARKED_MAX`` (live/services.py); the beat's
  ``live.resend_parked_group_pushes`` sends them once the broker answers.
"""

from __future__ import annotations

PARKED_GROUP_PUSHES = "live:{parked}:group_pushes"


def _tag(uid: int) -> str:
    return f"live:{{u:{uid}}}"


def seen(uid: int) -> str:
    return f"{_tag(uid)}:seen"


def devices(uid: int) -> str:
    return f"{_tag(uid)}:dev"


def connected_at(uid: int) -> str:
    return f"{_tag(uid)}:at"


def meta(uid: int) -> str:
    return f"{_tag(uid)}:meta"


def log(uid: int) -> str:
    return f"{_tag(uid)}:log"


def user_keys(uid: int) -> list[str]:
    """The keys the scripts take for one user, in their order: seen, dev, at, meta, log."""
    return [seen(uid), devices(uid), connected_at(uid), meta(uid), log(uid)]


def group(uid: int) -> str:
    """The channel-layer group every connection of ``uid`` joins, on whichever gateway."""
    return f"live.u{uid}"
