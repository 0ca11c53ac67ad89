"""Group heads and member positions in Redis (keys.py): the writes a send, a read, a recall, a join
make, and the one read model of a member's unread that the unread view, its fast path
(``unread/fastpath.py``, through ``groups.selectors``) and the conversation list share. Only
``groups`` imports this module.

A member's unread in a group is ``max - read - recalled after read - hidden after read`` (never
negative), their mentions the mention markers after ``read``; both come from the group's
``max`` and recalled seqs and the member's own position (``keys.member``). The unread summary
reads them with one HGETALL of the user's positions, then one MGET of their groups' summaries
(``keys.summary``) per hash slot (``summary_plan``: ONE on a single Redis; on a cluster each goes
to the node of its slot, and no command spans users and groups). A group with more recalls than
the summary keeps is counted exactly with a ZCOUNT of its recalled set (``unread_commands``,
also the lists' read: ``heads_and_tallies``).

The conversation list orders a user's groups by the summaries' sort key (the same MGET), then
reads heads and tallies only for the groups of the page it shows.

Heads and positions are caches of MySQL (``groups.models``): a missing head or a user
whose positions were never built are rebuilt from it (``groups.repair``).

Cost: parsing is per value and memoized (``PARSED_KEPT`` values each of positions and summaries
of up to ``SHORT`` bytes, tens of MB a process at most: a summary is shared by every member of
its group, a position rarely changes between two reads), and the common tally (nothing recalled,
mentioned or hidden) is one subtraction: for a user in 500 groups, parsing and counting went from
2.9 ms to 0.35 ms a read (warm), the unread view's group read from 3.8 to 0.9 ms and the fast
path's answer from p50 2.5 to 0.75 ms (in-process).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from itertools import chain, repeat
from operator import and_, le, lt, sub
from typing import Any

import hiredis
from redis.crc import key_slot

from groups import keys, lua
from infra.redis import clustered, get_redis
from infra.redis_mux import Packed
from storage.events import publish_group_into, unpublished

Command = list[str | bytes]
PARSED_KEPT = 1 << 15  # parsed values memoized per process (positions, summaries, tallies)
SHORT = 256  # only values up to this many bytes are memoized (a long recall list is not kept)


@dataclass(frozen=True, slots=True)
class Position:
    read: int
    mentions: tuple[int, ...] = ()
    hidden: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Head:
    max_seq: int
    at: int = 0
    sort_key: int = 0
    last: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Tally:
    unread: int
    mentions: int


@dataclass
class UnreadTotals:
    unread: int = 0
    mentions: int = 0
    per_group: dict[int, Tally] = field(default_factory=dict)


def _seqs(text: bytes) -> tuple[int, ...]:
    return tuple(int(s) for s in text.split(b",") if s)


def parse_position(value: bytes) -> Position:
    return _position_kept(value) if len(value) <= SHORT else _position(value)


def _position(value: bytes) -> Position:
    read, mentions, hidden = value.split(b"|")
    return Position(int(read), _seqs(mentions), _seqs(hidden))


_position_kept = lru_cache(maxsize=PARSED_KEPT)(_position)


def parse_positions(raw: Mapping[bytes, bytes]) -> dict[int, Position]:
    return {int(k): parse_position(v) for k, v in raw.items() if k != keys.BUILT_FIELD}


def tally(position: Position, max_seq: int, recalled_after: int) -> Tally:
    """What one member has not read in one group (DESIGN.md): never negative."""
    hidden = sum(1 for s in position.hidden if position.read < s <= max_seq)
    unread = max(0, max_seq - position.read - recalled_after - hidden)
    mentions = sum(1 for s in position.mentions if position.read < s <= max_seq)
    return _tally(unread, mentions)


@lru_cache(maxsize=PARSED_KEPT)
def _tally(unread: int, mentions: int) -> Tally:
    """One shared (immutable) Tally per value: most groups of a list count the same few."""
    return Tally(unread, mentions)


# -- the read: commands and replies (one group's tally; groups whose summary is not enough) -----
def unread_commands(positions: Mapping[int, Position]) -> list[Command]:
    """Two single-key commands per group, in ``positions`` order."""
    out: list[Command] = []
    for gid, position in positions.items():
        out.append(["HGET", keys.head(gid), "max"])
        out.append(["ZCOUNT", keys.recalled(gid), f"({position.read}", "+inf"])
    return out


def unread_from_replies(
    positions: Mapping[int, Position], replies: Sequence[Any]
) -> UnreadTotals | None:
    """The totals, or None when a head is missing (rebuilt from MySQL by the caller)."""
    totals = UnreadTotals()
    for i, (gid, position) in enumerate(positions.items()):
        max_seq, recalled_after = replies[2 * i], replies[2 * i + 1]
        if max_seq is None:
            return None
        counted = tally(position, int(max_seq), int(recalled_after))
        totals.per_group[gid] = counted
        totals.unread += counted.unread
        totals.mentions += counted.mentions
    return totals


# -- the unread read of many groups: their summaries, one MGET per slot --------------------------
@dataclass(frozen=True, slots=True)
class Summary:
    max_seq: int
    recalled: tuple[int, ...]  # ascending; the newest keys.RECALLS_KEPT
    cut: bool  # older recalls were dropped from ``recalled``
    sort_key: int | None = None  # the head's; None in a summary written before it was added


def summary_plan(gids: Sequence[int]) -> tuple[list[Command], list[int]]:
    """MGET commands over the groups' summaries, one per hash slot (ONE on a single Redis), and
    the gids in the order of their concatenated replies."""
    if not clustered():
        return [["MGET", *map(_summary_key, gids)]], list(gids)
    by_slot: dict[int, list[int]] = {}
    for gid in gids:
        by_slot.setdefault(key_slot(_summary_key(gid).encode()), []).append(gid)
    commands: list[Command] = [["MGET", *map(_summary_key, s)] for s in by_slot.values()]
    return commands, [g for s in by_slot.values() for g in s]


_summary_key = lru_cache(maxsize=PARSED_KEPT)(keys.summary)


def parse_summary(value: bytes) -> Summary:
    return _summary_kept(value) if len(value) <= SHORT else _summary(value)


def _summary(value: bytes) -> Summary:
    max_seq, recalled, cut, *sort_key = value.split(b"|")
    sk = int(sort_key[0]) if sort_key else None
    return Summary(int(max_seq), _seqs(recalled), cut == b"1", sk)


_summary_kept = lru_cache(maxsize=PARSED_KEPT)(_summary)


def summary_tally(position: Position, summary: Summary) -> Tally | None:
    """The member's tally from the summary; None when recalls it needs were dropped from it."""
    if not (summary.recalled or position.mentions or position.hidden):  # the common case
        return _tally(max(0, summary.max_seq - position.read), 0)
    if summary.cut and position.read < summary.recalled[0]:
        return None
    recalled_after = sum(1 for s in summary.recalled if s > position.read)
    return tally(position, summary.max_seq, recalled_after)


def summaries(order: Sequence[int], replies: Sequence[Any]) -> dict[int, Summary | None]:
    """gid → summary (None where missing) from the MGET replies of ``summary_plan``."""
    flat = [value for reply in replies for value in reply]
    return {g: parse_summary(v) if v else None for g, v in zip(order, flat, strict=True)}


def fast_totals(
    positions: Mapping[int, Position], found: Mapping[int, Summary | None]
) -> UnreadTotals | None:
    """The totals from the summaries alone; None when one is missing or not enough (the unread
    view then answers: it rebuilds a missing head and counts dropped recalls exactly)."""
    per_group: dict[int, Tally] = {}
    unread = mentions = 0
    for gid, position in positions.items():
        summary = found.get(gid)
        if summary is None:
            return None
        if summary.recalled or position.mentions or position.hidden:
            counted = summary_tally(position, summary)
            if counted is None:
                return None
        else:  # the common case, inline: one subtraction
            counted = _tally(max(0, summary.max_seq - position.read), 0)
        per_group[gid] = counted
        unread += counted.unread
        mentions += counted.mentions
    return UnreadTotals(unread, mentions, per_group)


# -- the unread fast path's read: the same answer as fast_totals, on the raw replies ------------
@dataclass(frozen=True)
class RawPlan:
    """A member's positions as Redis returned them (gids and values, aligned) and the MGETs of
    their groups' summaries (on a single Redis one MGET, packed once per set of groups: see
    ``_packed_mget``); ``order``: the gids of the concatenated MGET replies."""

    gids: list[bytes]
    values: list[bytes]
    commands: list[Command | Packed]
    order: list[bytes]


PACKED_KEPT = 1024  # members' MGETs kept packed per process (a 500-group one is ~10 KB)
PACK_FROM = 64  # groups: below that, building and packing the MGET costs less than the lookup


def raw_plan(reply: Sequence[bytes]) -> RawPlan:
    """From the HGETALL reply of ``keys.member``; no parsing (measured: parsing 500 positions
    into objects was half of the fast path's ~550 µs per request for a member of 500 groups)."""
    gids, values = list(reply[::2]), list(reply[1::2])
    if keys.BUILT_FIELD in gids:
        at = gids.index(keys.BUILT_FIELD)
        del gids[at], values[at]
    if not gids:
        return RawPlan(gids, values, [], gids)
    if not clustered():
        if len(gids) >= PACK_FROM:
            return RawPlan(gids, values, [_packed_mget(b",".join(gids))], gids)
        return RawPlan(gids, values, [["MGET", *keys.summaries_raw(gids)]], gids)
    names = keys.summaries_raw(gids)
    by_slot: dict[int, list[int]] = {}
    for i, name in enumerate(names):
        by_slot.setdefault(key_slot(name), []).append(i)
    commands: list[Command | Packed] = [["MGET", *(names[i] for i in s)] for s in by_slot.values()]
    return RawPlan(gids, values, commands, [gids[i] for s in by_slot.values() for i in s])


@lru_cache(maxsize=PACKED_KEPT)
def _packed_mget(joined_gids: bytes) -> Packed:
    """The MGET of the summaries of the comma-joined gids, packed: a member's groups rarely
    change between two reads, and building 500 key names and packing them cost ~65 µs."""
    names = keys.summaries_raw(joined_gids.split(b","))
    return Packed(hiredis.pack_command(("MGET", *names)))  # type: ignore[arg-type]


# The tally on the raw bytes, every group at once: positions ``<read>|<mentions>|<hidden>`` and
# summaries ``<max>|<recalled>|<cut>|<sort key>`` are split by C-level bytes calls and their
# numbers read by one ``json.loads`` each; unread is summed by ``map`` and mentions counted the
# same way over the groups that have some. What comes from the positions is kept per distinct
# positions reply (a member's positions change when they read, the summaries at every send).
# Only groups with hidden or recalled messages (rare) go through ``summary_tally`` one by one.
# Measured for a member of 500 groups, 50 of them with a mention: 216 µs per request in the
# per-group loop, ~90 µs here (in process).
POSITION_FIELDS = 3
SUMMARY_FIELDS = 4


@dataclass(frozen=True)
class RawPositions:
    """A member's positions, split once: read seqs, the groups with hidden messages, and the
    mention seqs of the groups with mentions (``low``: each mention's group read seq)."""

    reads: list[int]
    hidden: set[int]
    mentioned: list[int]
    counts: list[int]
    seqs: list[int]
    low: list[int]


def raw_totals(plan: RawPlan, replies: Sequence[Sequence[bytes | None]]) -> tuple[int, int] | None:
    """(unread, mentions) over the member's groups, exactly as ``fast_totals`` counts them; None
    when a summary is missing or lacks recalls the member needs (the view answers)."""
    flat = [value for reply in replies for value in reply]
    if plan.order is not plan.gids:  # a cluster: the MGETs went per slot
        by_gid = dict(zip(plan.order, flat, strict=True))
        flat = [by_gid[gid] for gid in plan.gids]
    if not flat:
        return 0, 0
    if None in flat:
        return None
    summaries: list[bytes] = flat  # type: ignore[assignment]
    positions = _raw_positions(b"|".join(plan.values), len(summaries))
    sf = b"|".join(summaries).split(b"|")
    if positions is None or len(sf) != SUMMARY_FIELDS * len(summaries):
        return _one_by_one(plan.values, summaries)  # a value of another shape
    maxes = _ints(sf[::SUMMARY_FIELDS])
    special = positions.hidden | _with_any(sf[1::SUMMARY_FIELDS])
    behind = list(map(sub, maxes, positions.reads))
    unread = sum(behind) if min(behind) >= 0 else sum(map(max, behind, repeat(0)))
    mentions = _mentions(positions, maxes, special)
    for i in special:  # hidden or recalled messages: counted exactly, group by group
        counted = summary_tally(parse_position(plan.values[i]), parse_summary(summaries[i]))
        if counted is None:
            return None
        unread += counted.unread - max(0, behind[i])
        mentions += counted.mentions
    return unread, mentions


@lru_cache(maxsize=PACKED_KEPT)
def _raw_positions(joined: bytes, count: int) -> RawPositions | None:
    fields = joined.split(b"|")
    if len(fields) != POSITION_FIELDS * count:
        return None
    reads = _ints(fields[::POSITION_FIELDS])
    mentioned = sorted(_with_any(fields[1::POSITION_FIELDS]))
    lists = [fields[POSITION_FIELDS * i + 1] for i in mentioned]
    counts = [m.count(b",") + 1 for m in lists]
    seqs = _ints(b",".join(lists).split(b",")) if lists else []
    low = list(chain.from_iterable(map(repeat, (reads[i] for i in mentioned), counts)))
    hidden = _with_any(fields[2::POSITION_FIELDS])
    return RawPositions(reads, hidden, mentioned, counts, seqs, low)


def _ints(fields: list[bytes]) -> list[int]:
    found: list[int] = json.loads(b"[" + b",".join(fields) + b"]")
    return found


def _with_any(fields: list[bytes]) -> set[int]:
    """The indexes of the non-empty fields (none, the usual answer, in one C-level ``any``)."""
    return set(filter(fields.__getitem__, range(len(fields)))) if any(fields) else set()


def _mentions(positions: RawPositions, maxes: list[int], special: set[int]) -> int:
    """Mention seqs ``s`` with ``read < s <= max`` over the mentioned groups not in ``special``
    (those are counted by ``summary_tally``)."""
    if not positions.mentioned:
        return 0
    high_each = (0 if i in special else maxes[i] for i in positions.mentioned)
    high = list(chain.from_iterable(map(repeat, high_each, positions.counts)))
    return sum(map(and_, map(lt, positions.low, positions.seqs), map(le, positions.seqs, high)))


def _one_by_one(values: Sequence[bytes], summaries: Sequence[bytes]) -> tuple[int, int] | None:
    unread = mentions = 0
    for position, summary in zip(values, summaries, strict=True):
        counted = summary_tally(parse_position(position), parse_summary(summary))
        if counted is None:
            return None
        unread += counted.unread
        mentions += counted.mentions
    return unread, mentions


def positions_raw(uid: int) -> dict[bytes, bytes]:
    raw: dict[bytes, bytes] = get_redis().hgetall(keys.member(uid))  # type: ignore[assignment]
    return raw


def run(commands: Sequence[Command]) -> list[Any]:
    pipe = get_redis().pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return list(pipe.execute())


def heads(gids: Sequence[int]) -> dict[int, Head | None]:
    """The heads of ``gids`` in one pipelined read; None where a head is missing."""
    replies = run([["HMGET", keys.head(g), "max", "at", "sk", "last"] for g in gids])
    return {g: _head(r) for g, r in zip(gids, replies, strict=True)}


def heads_and_tallies(
    positions: Mapping[int, Position],
) -> dict[int, tuple[Head | None, Tally | None]]:
    """Each group's head and the member's tally in one pipelined read (the lists); None where
    the head is missing."""
    commands: list[Command] = []
    for gid, position in positions.items():
        commands.append(["HMGET", keys.head(gid), "max", "at", "sk", "last"])
        commands.append(["ZCOUNT", keys.recalled(gid), f"({position.read}", "+inf"])
    replies = run(commands)
    out: dict[int, tuple[Head | None, Tally | None]] = {}
    for i, (gid, position) in enumerate(positions.items()):
        head = _head(replies[2 * i])
        counted = tally(position, head.max_seq, int(replies[2 * i + 1])) if head else None
        out[gid] = (head, counted)
    return out


def _head(reply: Sequence[bytes | None]) -> Head | None:
    max_seq, at, sort_key, last = reply
    if max_seq is None:
        return None
    summary = json.loads(last) if last else None
    return Head(int(max_seq), int(at or 0), int(sort_key or 0), summary)


# -- writes ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Sent:
    gid: int
    seq: int
    msgkey: int
    sender_uid: int
    at_ms: int
    summary: dict[str, Any]
    mentioned: Sequence[int] = ()


def apply_send(sent: Sent) -> BaseException | None:
    """The send's Redis writes, O(1) in the group's size, in one round trip: the head, the
    sender's read position, one marker per mentioned member, one delivery event. Idempotent
    (max-merges and sets), so a replay finishes what an interrupted send left. Raises when a
    write failed; returns the delivery event's error when only the event failed (its stream,
    sharded by gid, on a cluster master that did not answer: storage/events.py ``unpublished``),
    else None."""
    pipe = get_redis().pipeline(transaction=False)
    summary = json.dumps(sent.summary, separators=(",", ":"))
    args = [sent.seq, sent.at_ms, sent.msgkey, summary]
    head_keys = [keys.head(sent.gid), keys.summary(sent.gid)]
    lua.call("head_apply", head_keys, [*args, keys.RECALLS_KEPT], client=pipe)
    lua.call("member_read", [keys.member(sent.sender_uid)], [sent.gid, sent.seq], client=pipe)
    for uid in sent.mentioned:
        mark = [sent.gid, sent.seq, "m", "add"]
        lua.call("member_mark", [keys.member(uid)], mark, client=pipe)
    event = publish_group_into(
        pipe, gid=sent.gid, seq=sent.seq, msgkey=sent.msgkey, sender=sent.sender_uid
    )
    return unpublished(pipe.execute(raise_on_error=False), event)


def read_move(uid: int, gid: int, seq: int) -> int:
    """Move ``uid``'s position in ``gid`` to ``seq`` at least; -1 if the position is not built."""
    return int(lua.call("member_read", [keys.member(uid)], [gid, seq]))


def marks_change(uids: Iterable[int], gid: int, seq: int, *, kind: str, op: str) -> None:
    """Add or drop a mention (``m``) or hidden-for-me (``h``) marker of ``seq`` for each uid."""
    pipe = get_redis().pipeline(transaction=False)
    for uid in uids:
        lua.call("member_mark", [keys.member(uid)], [gid, seq, kind, op], client=pipe)
    pipe.execute()


def positions_set(entries: Iterable[tuple[int, int, Position]], *, mode: str = "set") -> None:
    """Write positions ``(uid, gid, position)`` as MySQL has them (a join, a rebuild). ``mode``
    ``keep`` leaves a read position that is already further on (a rebuild never moves back);
    ``ifmissing`` writes only positions Redis lacks (a join retried after a failure)."""
    pipe = get_redis().pipeline(transaction=False)
    for uid, gid, p in entries:
        args = [gid, p.read, _csv(p.mentions), _csv(p.hidden), mode]
        lua.call("member_set", [keys.member(uid)], args, client=pipe)
    pipe.execute()


def positions_mark_built(uid: int, *, empty: bool = False) -> None:
    """Mark ``uid``'s positions as built; ``empty`` (no group): only for EMPTY_TTL_S."""
    pipe = get_redis().pipeline(transaction=False)
    pipe.hset(keys.member(uid), keys.BUILT_FIELD, b"1")
    if empty:
        pipe.expire(keys.member(uid), keys.EMPTY_TTL_S)
    pipe.execute()


def positions_drop(uids: Iterable[int], gid: int) -> None:
    pipe = get_redis().pipeline(transaction=False)
    for uid in uids:
        pipe.hdel(keys.member(uid), str(gid))
    pipe.execute()


def head_recall(gid: int, seq: int, summary: dict[str, Any]) -> None:
    text = json.dumps(summary, separators=(",", ":"))
    head_keys = [keys.head(gid), keys.recalled(gid), keys.summary(gid)]
    lua.call("head_recall", head_keys, [seq, text, keys.RECALLS_KEPT])


def head_edit(gid: int, seq: int, summary: dict[str, Any]) -> None:
    """Message ``seq``'s content changed: the head shows the new summary if it is its last."""
    text = json.dumps(summary, separators=(",", ":"))
    lua.call("head_edit", [keys.head(gid)], [seq, text])


def head_fill(gid: int, head: Head, shown_seq: int, recalled: Sequence[int]) -> None:
    last = json.dumps(head.last, separators=(",", ":")) if head.last else ""
    args = [head.max_seq, shown_seq, head.at, head.sort_key, last, keys.RECALLS_KEPT, *recalled]
    lua.call("head_fill", [keys.head(gid), keys.recalled(gid), keys.summary(gid)], args)


def head_expire(gid: int, upto_seq: int) -> None:
    """Retention removed ``gid``'s messages up to ``upto_seq``: no last message shown if it went."""
    lua.call("head_expire", [keys.head(gid)], [upto_seq])


def head_drop(gid: int) -> None:
    get_redis().delete(keys.head(gid), keys.recalled(gid), keys.summary(gid))


def _csv(seqs: Iterable[int]) -> str:
    return ",".join(str(s) for s in seqs)
