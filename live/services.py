"""Live delivery's writes: connection tokens, presence, the per-user event log, pushes.

Contracts:
- ``token_mint`` / ``token_open``: a token is Django's signed ``(uid, device_id)`` with a
  timestamp (salt ``live.token``); it opens connections for ``LIVE_TOKEN_TTL_S`` (60 s) and
  binds them to that user and device. Nothing is stored.
- ``publish_many(uids, event)`` (``publish_all`` for several events at once: one round trip and
  one channel-layer call for all): after a change is committed, one event for many users. One Lua
  call per Redis Cluster slot, all on one pipeline (ONE round trip on a single Redis; one per
  node, in parallel, on a cluster), keeps only the users seen within ``LIVE_RESUME_WINDOW_S``,
  appends the event to each one's log and tells which are connected now; then the pushes to the
  connected, one channel-layer message per gateway process for the whole call (``pusher``). A lazy
  event (a campaign batch's: its body is loaded only if needed) first asks which users are
  recently online (one MGET per slot, one round trip): a 4,000-recipient batch nobody watches
  costs that round trip and no query; with 2% online, one more call appends for those 80 and their
  80 pushes follow. Registered as the sink of ``infra.live_hooks`` (``LiveConfig.ready``); it never
  raises (a Redis outage loses the pushes, never the send: devices resync over REST).
- ``connection_open`` / ``connections_touch`` / ``connection_close``: a gateway's connection
  registers its device (online until ``PRESENCE_TTL_S`` past the last heartbeat), keeps its user
  recently online, and on open reads what a resuming device missed (``Opened``).
- A Redis restart (a crash loses up to its last second: AOF everysec) moves each log to a new
  epoch on its next write, naming the old one (``prev``) and the last position kept (``floor``):
  a cursor or a connection of the old epoch up to ``floor`` goes on, one past it gets ``resync``
  ``lost``, as the positions after ``floor`` are written again (lua/append.lua).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import redis
from django.conf import settings
from django.core import signing

from infra.live_hooks import Event, Lazy
from infra.redis import by_user_slot, clustered, get_redis
from live import cursors, keys
from live.cursors import Cursor
from live.lua import scripts
from live.pusher import group_send_many
from live.selectors import Entry, entries_from

log = logging.getLogger(__name__)
TOKEN_SALT = "live.token"
TOKEN_MAX_CHARS = 512


def now_ms() -> int:
    return int(time.time() * 1000)


def _window_s() -> int:
    return int(settings.LIVE_RESUME_WINDOW_S)


def _log_ttl_s() -> int:
    """The log outlives the window: a user last seen just inside it still finds every entry."""
    return 2 * _window_s() + 60


def _presence_ttl_ms() -> int:
    return 3 * int(settings.LIVE_HEARTBEAT_S) * 1000


# -- tokens --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Token:
    token: str
    expires_at: datetime


def token_mint(*, uid: int, device_id: str) -> Token:
    token = signing.dumps({"u": str(uid), "d": device_id}, salt=TOKEN_SALT, compress=False)
    ttl = timedelta(seconds=settings.LIVE_TOKEN_TTL_S)
    return Token(token, datetime.now(tz=UTC).replace(microsecond=0) + ttl)


def token_open(token: str) -> tuple[int, str] | None:
    """``(uid, device_id)`` the token binds, or None when it is bad or expired."""
    if not token or len(token) > TOKEN_MAX_CHARS:
        return None
    try:
        found = signing.loads(token, salt=TOKEN_SALT, max_age=settings.LIVE_TOKEN_TTL_S)
        return int(found["u"]), str(found["d"])
    except (signing.BadSignature, KeyError, TypeError, ValueError):
        return None


# -- publishing ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Logged:
    """One user's new log entry: its epoch and position, whether the user is connected, and
    the epoch before a Redis restart with the last position that survived it (``floor``)."""

    uid: int
    epoch: str
    pos: int
    online: bool
    prev: str = ""
    floor: int = 0


def publish_many(uids: Sequence[int], event: Lazy) -> None:
    publish_all([(uids, event)])


def publish_all(items: Sequence[tuple[Sequence[int], Lazy]]) -> None:
    """Several events, each for some users (a 1:1 message's two: the receiver's devices and
    the sender's other devices): each is logged for the recently online among its users and
    pushed to the connected, all in one pipelined round trip and one channel-layer call. A lazy
    event is built only when one of its users is recently online (a first round trip asks)."""
    try:
        _publish([ready for item in items if (ready := _resolved(*item)) is not None])
    except (redis.RedisError, OSError, TimeoutError) as exc:
        log.warning("live: %d pushes lost: %r", sum(len(uids) for uids, _ in items), exc)


def _resolved(uids: Sequence[int], event: Lazy) -> tuple[Sequence[int], Event] | None:
    if not callable(event):
        return uids, event
    online = recently_online(uids)
    return (online, event()) if online else None


def _publish(items: Sequence[tuple[Sequence[int], Event]]) -> None:
    if not items:
        return
    ms = now_ms()
    bodies = [json.dumps(event, separators=(",", ":"), ensure_ascii=False) for _, event in items]
    logged = log_append_all(
        [(uids, body) for (uids, _), body in zip(items, bodies, strict=True)], ms
    )
    group_send_many([_push(item, body, ms) for item, body in logged if item.online])


def recently_online(uids: Sequence[int]) -> list[int]:
    """The users among ``uids`` seen within the resume window: one MGET of their ``seen`` keys
    (for a 4,000-recipient batch ~3 ms, against ~5.5 ms for the same test in a Lua loop,
    measured); on a cluster one MGET per slot, the slots of each primary in one script call
    (``ScriptRegistry.call_by_slot``: ~1,000 slots for 1,000 recipients)."""
    unique = list(dict.fromkeys(uids))
    if not clustered():
        found = get_redis().execute_command("MGET", *[keys.seen(uid) for uid in unique])
        return [uid for uid, at in zip(unique, found, strict=True) if at]
    groups = by_user_slot(unique)
    named = {slot: [keys.seen(uid) for uid in group] for slot, group in groups.items()}
    replies = scripts.call_by_slot("seen", named, [])
    return [uid for s, g in groups.items() for uid, at in zip(g, replies[s], strict=True) if at]


def publish(uid: int, event: Lazy) -> None:
    publish_many([uid], event)


def _push(item: Logged, body: str, ms: int) -> tuple[str, dict[str, Any]]:
    cursor = Cursor(item.epoch, item.pos, ms)
    message = {"type": "live.event", "epoch": item.epoch, "pos": item.pos}
    restart = {"prev": item.prev, "floor": item.floor}  # a gateway still in ``prev`` goes on
    return keys.group(item.uid), {**message, **restart, "text": cursors.frame(body, cursor)}


def log_append_all(items: Sequence[tuple[Sequence[int], str]], ms: int) -> list[tuple[Logged, str]]:
    """Append each event ``body`` (JSON) for the recently online among its ``uids``: one
    ``append`` call per slot group and event, all in one pipelined round trip."""
    calls = []
    pipe = get_redis().pipeline(transaction=False)
    for uids, body in items:
        args = [body, settings.LIVE_LOG_MAXLEN, _log_ttl_s(), ms, cursors.new_epoch()]
        for group in by_user_slot(dict.fromkeys(uids)).values():
            user_keys = [k for uid in group for k in keys.user_keys(uid)]
            scripts.call("append", user_keys, args, client=pipe)
            calls.append((group, body))
    replies = pipe.execute()
    pairs = zip(calls, replies, strict=True)
    return [(found, body) for (group, body), reply in pairs for found in _logged(group, reply)]


def _logged(group: Sequence[int], reply: Sequence[Any]) -> list[Logged]:
    return [_one_logged(group, reply[i : i + 6]) for i in range(0, len(reply), 6)]


def _one_logged(group: Sequence[int], item: Sequence[Any]) -> Logged:
    index, epoch, pos, online, prev, floor = item
    uid = group[int(index) - 1]
    return Logged(uid, _text(epoch), int(pos), online == 1, _text(prev), int(floor))


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


# -- connections -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Opened:
    """A new connection's start: the log's epoch and head, the head's cursor (for ``hello``),
    and either the frames a resuming device missed (``resumed``) or why it must ``resync``."""

    epoch: str
    head: int
    cursor: str
    resumed: bool = False
    resync: str | None = None
    missed: list[Entry] = field(default_factory=list)


def connection_open(*, uid: int, device_id: str, since: str | None) -> Opened:
    wanted = cursors.parse(since) if since else None
    ms = now_ms()
    args = [device_id, ms, ms + _presence_ttl_ms(), _window_s(), _log_ttl_s()]
    resume = [wanted.epoch, wanted.pos] if wanted else ["", 0]
    reply = scripts.call(
        "connect",
        keys.user_keys(uid),
        [*args, cursors.new_epoch(), *resume, settings.LIVE_LOG_MAXLEN],
    )
    epoch, head = _text(reply[0]), int(reply[1])
    opened = Opened(epoch, head, str(Cursor(epoch, head, ms)))
    if since is None:
        return opened
    if wanted is not None and _survived(wanted, _text(reply[3]), int(reply[4])):
        wanted = Cursor(epoch, wanted.pos, wanted.ms)  # the same log, renamed by the restart
    return _resumed(opened, wanted, entries_from(epoch, reply[2] or []), ms)


def _survived(wanted: Cursor, prev: str, floor: int) -> bool:
    """A cursor from before a Redis restart that names a position the restart kept."""
    return bool(prev) and wanted.epoch == prev and wanted.pos <= floor


def _resumed(opened: Opened, wanted: Cursor | None, missed: list[Entry], ms: int) -> Opened:
    if wanted is not None and wanted.epoch != opened.epoch:
        too_old = ms - wanted.ms > _window_s() * 1000
        return Opened(opened.epoch, opened.head, opened.cursor, resync=_gone(too_old))
    if wanted is None or wanted.pos > opened.head:  # not ours, or ahead of the log: lost
        return Opened(opened.epoch, opened.head, opened.cursor, resync="lost")
    if wanted.pos < opened.head and (not missed or missed[0].pos != wanted.pos + 1):
        return Opened(opened.epoch, opened.head, opened.cursor, resync="too_old")
    return Opened(opened.epoch, opened.head, opened.cursor, resumed=True, missed=missed)


def _gone(too_old: bool) -> str:
    return "too_old" if too_old else "lost"


def connections_touch(devices: Sequence[tuple[int, str]]) -> None:
    """Heartbeats of ``(uid, device_id)`` connections, all on one pipeline (one round trip)."""
    ms = now_ms()
    pipe = get_redis().pipeline(transaction=False)
    for uid, device_id in devices:
        args = [device_id, ms, ms + _presence_ttl_ms(), _window_s(), _log_ttl_s()]
        scripts.call("touch", keys.user_keys(uid), args, client=pipe)
    pipe.execute()


def connection_close(*, uid: int, device_id: str) -> None:
    user_keys = keys.user_keys(uid)[:3]
    scripts.call("disconnect", user_keys, [device_id, now_ms(), _window_s()])


# -- group pushes the broker did not take ------------------------------------------------------
PARKED_MAX = 10_000  # kept while the broker is out; past it the oldest go (a log line says so)
PARKED_BATCH = 100  # taken off the list per call (the beat sends its task every 5 s)


def park_group_push(gid: int, event: Event) -> None:
    """Keeps a group push the broker did not take on the data Redis (keys.PARKED_GROUP_PUSHES),
    for ``resend_parked_group_pushes``: the group's online devices get it, late, once the broker
    answers. Raises what Redis raises (the caller logs the push as lost)."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.rpush(keys.PARKED_GROUP_PUSHES, json.dumps({"gid": gid, "event": event}))
    pipe.ltrim(keys.PARKED_GROUP_PUSHES, -PARKED_MAX, -1)
    length, _ = pipe.execute()
    if length > PARKED_MAX:
        log.warning("live: %d parked group pushes dropped, the oldest", length - PARKED_MAX)


def resend_parked_group_pushes(send: Callable[[int, Event], object]) -> int:
    """Hands each parked push to ``send`` (``group_push.delay``), oldest first; returns how many.
    A push ``send`` fails on goes back to the list's head with those after it, and the error is
    raised. At least once, like every push: a process that dies between taking a slice off the
    list and sending it loses that slice's pushes (at most PARKED_BATCH), which the devices then
    see when they next read."""
    sent = 0
    while items := _parked_slice():
        for done, raw in enumerate(items):
            item = json.loads(raw)
            try:
                send(int(item["gid"]), item["event"])
            except Exception:
                get_redis().lpush(keys.PARKED_GROUP_PUSHES, *reversed(items[done:]))
                raise
            sent += 1
    return sent


def _parked_slice() -> list[bytes]:
    """Up to PARKED_BATCH parked pushes taken off the list's head (LPOP with a count: a list)."""
    return cast("list[bytes]", get_redis().lpop(keys.PARKED_GROUP_PUSHES, PARKED_BATCH) or [])
