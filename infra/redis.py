"""The process-wide Redis client every app uses for its data keys (redis-py with hiredis).

One Redis (``REDIS_URL``), or a Redis Cluster (``REDIS_CLUSTER=1``, ``REDIS_URL`` naming any of its
nodes): then ``get_redis`` is redis-py's ``RedisCluster``, which learns the slot map from that node
and follows MOVED/ASK, failovers and resharding. The Celery broker is not here: it stays on its
own plain Redis (``infra.broker``), as Celery's Redis transport does not run on a cluster.

The contract every store keeps, so that the same code runs on both:
- Each Lua call and each multi-key command touches ONE hash slot. Per-user keys carry the tag
  ``{u:<uid>}``, per-sender quota keys ``{q:<sender>}``; keys read or written together in one
  script or MULTI share a tag (``{ann}``, ``{msgkey:<node>}``, ``{ch:<channel>}``).
- A call that spans users is split with ``by_user_slot`` (one group per slot on a cluster; ONE
  group, the caller's items unchanged, on a single Redis, so nothing changes there); a script's
  groups run as one call per primary (``node_slots`` here, ``infra.luascripts.call_by_slot``),
  queued on one non-transactional pipeline, which on a cluster sends each node its share, every
  node's before reading any, so the nodes work in parallel (``_Pipeline``, last point).
- A one-shot marker that makes such a call idempotent is kept per group, inside the group's slot:
  ``slot_tag(slot)`` is a hash tag that maps to that slot, so the key name depends on the slot,
  not on which items happen to be in the group.
- Scripts are sent by SHA (EVALSHA). A node that lost its script cache (a restart, a replica
  just promoted: Redis 7 does not replicate SCRIPT LOAD) answers NOSCRIPT; a single call then
  loads the script and retries (redis-py's ``Script``), and a pipeline, which goes without
  asking ``SCRIPT EXISTS`` first, loads it (on a cluster on every primary) and re-sends only the
  calls that failed (``_GuardedPipeline``, ``_Pipeline``), which therefore never ran.
- A cluster pipeline (``_Pipeline``: redis-py's ``ClusterPipeline`` with its own ``execute``)
  routes each command by its first key, writes each node's share in one go to every node before
  reading any, and sends alone, through ``RedisCluster`` (redirects, slot-map refresh, retries),
  whatever met MOVED/ASK, a lost connection or a cluster in failover.

Gray failures (infra/timeouts.py, infra/breakers.py): the client connects within the ``redis``
row of STORE_TIMEOUTS and waits that row's read timeout for a reply (1 s in an API process, 5 s
in a worker); a lost connection is retried once at once (a restarted Redis), a timeout is not
(a frozen one would cost the timeout again). Every command and pipeline goes through the
``redis`` circuit breaker (on a cluster, the breaker of the primary it goes to: a pipeline's
share for a primary whose breaker is open is not sent, and fails as an outage at once, while the
other primaries' shares go on), and a write Redis refuses (OOM, MISCONF) is counted and logged
(``infra.outages.report_refused_write``, through ``on_refused_write``).
"""

from __future__ import annotations

import contextlib
import hashlib
from binascii import crc_hqx
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any, TypeVar

import redis
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from redis.backoff import NoBackoff
from redis.client import Pipeline
from redis.cluster import ClusterNode, ClusterPipeline, PipelineStrategy, RedisCluster
from redis.commands.core import Script
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot
from redis.exceptions import (
    AskError,
    ClusterDownError,
    MovedError,
    NoScriptError,
    SlotNotCoveredError,
    TryAgainError,
)
from redis.retry import Retry
from redis.typing import KeyT

from infra import breakers, embedded, timeouts
from infra.store_errors import store_unavailable

T = TypeVar("T")
_SCRIPTS: dict[str, Any] = {}  # SHA -> source of every script registered on the cluster client
REFUSED_WRITE_HOOKS: list[Callable[[redis.ResponseError], None]] = []


def _guarded(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func`` through the ``redis`` breaker; a refused write reported on its way out."""
    return _reported(breakers.guarded_at, "redis", "", func, *args, **kwargs)


def _reported(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func``, a write Redis refused (OOM, MISCONF) reported on its way out."""
    try:
        return func(*args, **kwargs)
    except redis.ResponseError as exc:
        _report(exc)
        raise


def _report(exc: redis.ResponseError) -> None:
    """Each error reply once: a cluster pipeline's command resent alone (``_alone``) is reported
    by the client as it comes back, then met again among the pipeline's replies."""
    if getattr(exc, "missive_reported", False):
        return
    exc.missive_reported = True  # type: ignore[attr-defined]
    for hook in REFUSED_WRITE_HOOKS:
        hook(exc)


def _reported_replies(replies: list[Any]) -> list[Any]:
    """A pipeline's replies as ``execute(raise_on_error=False)`` returns them, each error reply
    reported as ``_reported`` does for a raised one (a send's pipeline reads its replies one by
    one: storage/events.py ``unpublished``)."""
    for reply in replies:
        if isinstance(reply, redis.ResponseError):
            _report(reply)
    return replies


def on_refused_write(hook: Callable[[redis.ResponseError], None]) -> None:
    """Call ``hook`` with every error reply the client meets (infra.outages counts the OOM and
    MISCONF ones: registered from infra/apps.py, so this module imports nothing above it)."""
    if hook not in REFUSED_WRITE_HOOKS:
        REFUSED_WRITE_HOOKS.append(hook)


class _Redis(redis.Redis):
    """One Redis, every command and pipeline through the breaker (module docstring)."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        return _guarded(super().execute_command, *args, **options)

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Pipeline:
        pipe = super().pipeline(transaction=transaction, shard_hint=shard_hint)
        pipe.__class__ = _GuardedPipeline  # same object, its execute guarded
        return pipe


class _GuardedPipeline(Pipeline):
    """redis-py's pipeline through the breaker, its scripts sent by EVALSHA without asking first.

    redis-py asks ``SCRIPT EXISTS`` before every pipeline that holds a script: a round trip each
    time, 6 of the 13 a 1:1 send made to Redis (counted on a send through the production server;
    BENCHMARKS.md, "1 ms more on every round trip"). Here the pipeline goes at once; a script the
    server lacks (restarted, flushed) answers NOSCRIPT without having run, and only that call is
    loaded and sent again, alone, as a cluster pipeline does (module docstring). A MULTI keeps
    redis-py's check: inside one, a failed call cannot be sent again on its own."""

    def load_scripts(self) -> None:
        if self._multi():
            super().load_scripts()

    def _multi(self) -> bool:
        return bool(vars(self).get("transaction") or self.explicit_transaction)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        return _reported_replies(_guarded(self._execute, raise_on_error))

    def _execute(self, raise_on_error: bool) -> list[Any]:
        scripts = {s.sha: s for s in self.scripts}
        if not scripts or self._multi():
            return super().execute(raise_on_error)
        queued = list(self.command_stack)
        replies = super().execute(raise_on_error=False)
        for i, reply in enumerate(replies):
            if isinstance(reply, NoScriptError) and queued[i][0][1] in scripts:
                replies[i] = _load_and_send(scripts[queued[i][0][1]], queued[i])
        first_error = next((r for r in replies if isinstance(r, Exception)), None)
        if raise_on_error and first_error is not None:
            raise first_error
        return replies


def _load_and_send(script: Script, queued: Queued) -> Any:
    client = script.registered_client
    try:
        client.script_load(script.script)
        return client.execute_command(*queued[0], **queued[1])
    except redis.ResponseError as exc:
        return exc


class _Cluster(RedisCluster):
    """``RedisCluster`` whose pipelines survive a node without the scripts (see above), every
    command and pipeline through the breaker. A lost connection, a failover in progress or an
    uncovered slot is retried (the slot map read again), a timeout is not, as on one Redis: a
    frozen master answered its users' API reads after 4-5 s, each retry paying the read
    timeout again until its replica was promoted (tests/api/test_cluster_freeze.py)."""

    ERRORS_ALLOW_RETRY = (redis.ConnectionError, ClusterDownError, SlotNotCoveredError)  # type: ignore[assignment]

    def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        where = "" if kwargs.get("target_nodes") else self._primary_of(args)
        return _reported(
            breakers.guarded_at, "redis", where, super().execute_command, *args, **kwargs
        )

    def _primary_of(self, args: tuple[Any, ...]) -> str:
        """The primary a keyed command goes to per the slot map (its breaker), or "" (the
        cluster's address in the settings) for a command without a key or a slot not mapped."""
        slot = _slot(args)
        if slot is None:
            return ""
        try:
            return str(_primary(self.nodes_manager.slots_cache, slot).name)
        except SlotNotCoveredError:
            return ""

    def script_load(self, script: Any) -> str:
        """SCRIPT LOAD on each primary that answers, each through its own breaker, one after
        the other; a primary that does not (frozen, cut off) is passed over and gets the script
        on its own first NOSCRIPT later. Raises only when none answered. redis-py's sends it to
        every primary at once and fails when one does not answer: after a failover (a promoted
        replica has no scripts: NOSCRIPT) with another master frozen, every script call of the
        live masters' users failed with that master's timeout (tests/api/test_cluster_freeze.py,
        a send whose event stream was on the frozen master: a 503 after 4.1 s)."""
        failed: list[Exception] = []
        primaries = self.get_primaries()
        for node in primaries:
            try:
                _reported(
                    breakers.guarded_at,
                    "redis",
                    node.name,
                    super().execute_command,
                    "SCRIPT LOAD",
                    script,
                    target_nodes=node,
                )
            except Exception as exc:
                if not store_unavailable(exc):
                    raise
                failed.append(exc)
        if len(failed) == len(primaries):
            raise failed[0]
        return hashlib.sha1(_bytes(script)).hexdigest()

    def register_script(self, script: Any) -> Script:
        found = super().register_script(script)
        _SCRIPTS[found.sha] = script
        return found

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> ClusterPipeline:
        pipe = super().pipeline(transaction=transaction, shard_hint=shard_hint)
        pipe.__class__ = _Pipeline  # same object, one method more: its constructor stays redis-py's
        return pipe


class _Pipeline(ClusterPipeline):
    def evalsha(self, sha: str, numkeys: int, *keys_and_args: Any) -> Any:
        """Queued like any keyed command (redis-py blocks it in cluster pipelines because a node
        may lack the script; ``execute`` below handles that)."""
        return self.execute_command("EVALSHA", sha, numkeys, *keys_and_args)

    def rename(self, src: KeyT, dst: KeyT) -> Any:
        """Queued like EVALSHA (redis-py blocks it in cluster pipelines; within one slot, as
        every caller keeps it, it is legal)."""
        return self.execute_command("RENAME", src, dst)

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        return _reported_replies(_reported(self._execute, raise_on_error))  # each node's breaker

    def _execute(self, raise_on_error: bool) -> list[Any]:
        strategy = self._execution_strategy
        if not isinstance(strategy, PipelineStrategy):  # MULTI/EXEC (one slot): redis-py's own
            return _guarded(super().execute, raise_on_error)
        queued = [(c.args, c.options) for c in strategy.command_queue]
        strategy.reset()
        replies = _by_node(self, queued)
        for i, reply in enumerate(replies):
            if isinstance(reply, RETRY_ALONE):
                replies[i] = _retry(queued[i], reply)
        first_error = next((r for r in replies if isinstance(r, Exception)), None)
        if raise_on_error and first_error is not None:
            raise first_error
        return replies


Queued = tuple[tuple[Any, ...], dict[str, Any]]


class Unrouted(redis.RedisError):
    """A queued command whose node is not found from its first key: it is sent on its own."""


# Sent again alone through ``RedisCluster.execute_command``, which follows MOVED/ASK, refreshes
# the slot map and retries lost connections. A command whose connection was lost may have run
# already: redis-py's own cluster pipeline retries it the same way; Missive's pipelined scripts
# carry exactly-once markers, and delivery events are at-least-once anyway. A timeout is not
# sent again: the node did not answer in time, and each command sent to it alone paid the read
# timeout once more (a frozen master held a 3-command pipeline 3 s: test_cluster_freeze.py).
RETRY_ALONE = (
    Unrouted,
    NoScriptError,
    MovedError,
    AskError,
    TryAgainError,
    ClusterDownError,
    SlotNotCoveredError,
    redis.ConnectionError,
)
NO_KEY = frozenset({"PING", "INFO", "SCRIPT", "CLUSTER", "FLUSHDB", "FLUSHALL", "DBSIZE", "TIME"})


def _by_node(pipe: ClusterPipeline, queued: list[Queued]) -> list[Any]:
    """Each node's commands in one write, every node written before any is read: redis-py's
    cluster pipeline without its per-command routing cost (a batch's 1,000 unread script calls
    took ~100 ms through it, 25-40 ms like this, on the shared 2-core test machine with the
    three masters on it; 5-10 ms on one Redis, measured)."""
    replies: list[Any] = [Unrouted()] * len(queued)
    groups: dict[str, tuple[Any, list[int]]] = {}
    for i, (args, _) in enumerate(queued):
        slot = _slot(args)
        if slot is None:
            continue
        try:
            node = _primary(pipe.nodes_manager.slots_cache, slot)
        except SlotNotCoveredError as exc:
            replies[i] = exc
            continue
        groups.setdefault(node.name, (node, []))[1].append(i)
    sent = []
    for node, indexes in groups.values():
        if not breakers.allows("redis", node.name):  # its primary just failed: not sent
            _failed(replies, indexes, breakers.open_error("redis"))
            continue
        client = pipe.get_redis_connection(node)
        try:  # a new connection's handshake meets a frozen node too: its commands fail alone
            conn = client.connection_pool.get_connection()
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            _failed(replies, indexes, exc)
            breakers.record_failure("redis", exc, where=node.name)
            continue
        sent.append((node, client, conn, indexes))
        try:
            conn.send_packed_command(conn.pack_commands([queued[i][0] for i in indexes]))
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            conn.disconnect()
            indexes[:] = _failed(replies, indexes, exc)
            breakers.record_failure("redis", exc, where=node.name)
    for node, client, conn, indexes in sent:
        try:  # the node's answer (or its silence) counts in its own breaker
            with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
                breakers.guarded_at(
                    "redis", node.name, _read, client, conn, indexes, queued, replies
                )
        finally:
            client.connection_pool.release(conn)
    return replies


def _read(
    client: Any, conn: Any, indexes: list[int], queued: list[Queued], replies: list[Any]
) -> None:
    done = 0
    try:
        for i in indexes:
            try:
                replies[i] = client.parse_response(conn, queued[i][0][0], **queued[i][1])
            except redis.ResponseError as exc:
                replies[i] = exc
            done += 1
    except (redis.ConnectionError, redis.TimeoutError) as exc:
        conn.disconnect()  # replies unread: the connection cannot be reused
        _failed(replies, indexes[done:], exc)
        raise  # for the node's breaker (_by_node)


def _failed(replies: list[Any], indexes: list[int], exc: Exception) -> list[int]:
    for i in indexes:
        replies[i] = exc
    return []


def _slot(args: tuple[Any, ...]) -> int | None:
    name = str(args[0]).upper()
    if name in ("EVALSHA", "EVAL"):
        return key_slot(_bytes(args[3])) if int(args[2]) > 0 else None
    if name in NO_KEY or len(args) < 2:
        return None
    return key_slot(_bytes(args[1]))


def _bytes(key: Any) -> bytes:
    return key if isinstance(key, bytes) else str(key).encode()


def _retry(queued: Queued, failure: Exception) -> Any:
    """Send one queued command alone; a script its (new) node lacks is loaded on every primary
    first (NOSCRIPT may come back only from the node a redirect leads to)."""
    args, options = queued
    script = _SCRIPTS.get(args[1]) if str(args[0]).upper() == "EVALSHA" else None
    if isinstance(failure, NoScriptError) and script:
        get_redis().script_load(script)  # to every primary
    reply = _alone(args, options)
    if isinstance(reply, NoScriptError) and script:
        get_redis().script_load(script)
        reply = _alone(args, options)
    return reply


def _alone(args: tuple[Any, ...], options: dict[str, Any]) -> Any:
    try:
        return get_redis().execute_command(*args, **options)
    except redis.RedisError as exc:
        return exc


def clustered() -> bool:
    return bool(settings.REDIS_CLUSTER)


@cache
def get_redis() -> redis.Redis:
    """The client; on a cluster a ``RedisCluster`` (typed as ``redis.Redis``: same commands),
    which finds the cluster through REDIS_URL's node or, when that one does not answer, through
    any of REDIS_CLUSTER_NODES (``seed_nodes``)."""
    if settings.REDIS_EMBEDDED:
        embedded.ensure_started(settings.VAR_DIR)
    if clustered():
        seeds = [ClusterNode(host, port) for host, port in seed_nodes()]
        client: Any = _Cluster.from_url(settings.REDIS_URL, startup_nodes=seeds, **_timeouts())
        return client
    return _Redis.from_url(settings.REDIS_URL, retry=_retry_policy(), **_timeouts())


def seed_nodes() -> list[tuple[str, int]]:
    """REDIS_CLUSTER_NODES as (host, port) pairs: more nodes than REDIS_URL's to find a cluster
    through, so that a process starts (and reads the slot map) while that node is down or was
    replaced. Without them, a dead REDIS_URL node stopped every process from starting although
    its replica served its slots (tests/infra/test_redis_cluster.py)."""
    found = []
    for item in settings.REDIS_CLUSTER_NODES:
        host, _, port = str(item).rpartition(":")
        if not host or not port.isdigit():
            raise ImproperlyConfigured(
                f"REDIS_CLUSTER_NODES: {item!r} is not host:port (e.g. 10.0.0.2:7000)"
            )
        found.append((host, int(port)))
    return found


def _timeouts() -> dict[str, Any]:
    return {
        "health_check_interval": 30,
        "socket_connect_timeout": timeouts.connect_s("redis"),
        "socket_timeout": timeouts.read_s("redis"),
    }


def _retry_policy() -> Retry:
    """Once at once on a lost connection; never on a timeout (module docstring)."""
    return Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,))


def user_slot(uid: int) -> int:
    """The slot of every per-user key (they carry the tag ``{u:<uid>}``)."""
    return _slot_of(b"u:%d" % uid)


def _slot_of(key: bytes) -> int:
    """The slot of a key without a hash tag (redis-py's ``key_slot`` looks for one first)."""
    return crc_hqx(key, 0) % REDIS_CLUSTER_HASH_SLOTS


def by_user_slot(uids: Iterable[int]) -> dict[int, list[int]]:
    """``uids`` grouped by the slot of their per-user keys; on a single Redis one group, slot 0.
    Without building a key per user: a 4,000-recipient batch spent ~13 ms grouping them
    through a key string and redis-py's ``key_slot`` per user, ~1.5 ms like this (profiled on
    the shared 2-core test machine)."""
    if not clustered():
        return {0: list(uids)}
    groups: dict[int, list[int]] = {}
    for uid in uids:
        groups.setdefault(user_slot(uid), []).append(uid)
    return groups


def node_slots(slots: Iterable[int]) -> list[list[int]]:
    """``slots`` gathered by the primary that serves them in the client's slot map (which may be
    stale: callers check where they land, ``infra.luascripts.call_by_slot``); one list on a
    single Redis."""
    if not clustered():
        return [list(slots)]
    cache = get_redis().nodes_manager.slots_cache  # type: ignore[attr-defined]
    nodes: dict[str, list[int]] = {}
    for slot in slots:
        nodes.setdefault(_primary(cache, slot).name, []).append(slot)
    return list(nodes.values())


def _primary(slots_cache: dict[int, list[Any]], slot: int) -> Any:
    """The primary of ``slot`` in the client's slot map: redis-py's ``get_node_from_slot``
    without its deprecated-argument wrapper and lock, which cost ~5 µs a call (~19 ms for the
    ~3,500 slots of a 4,000-recipient batch, profiled). A refresh replaces the map whole and a
    MOVED one slot's entry, so an unlocked read sees each slot's old entry or its new one; a
    stale one is caught where the call lands (``infra.luascripts.call_by_slot``)."""
    nodes = slots_cache.get(slot)
    if not nodes:
        raise SlotNotCoveredError(f'Slot "{slot}" not covered by the cluster.')
    return nodes[0]


@cache
def _slot_tags() -> tuple[str, ...]:
    """For each slot the shortest decimal tag that hashes to it, found once per process (~110,000
    CRCs, 40-60 ms on a quiet machine). Each pool process of a worker paid it on its first
    batch: 0.28 s of the four pool processes' CPU in a 300,000-recipient campaign on the
    cluster (py-spy); ``warm`` finds them in the worker's main process, before it forks."""
    tags: list[str | None] = [None] * REDIS_CLUSTER_HASH_SLOTS
    missing, n = REDIS_CLUSTER_HASH_SLOTS, 0
    while missing:
        slot = _slot_of(str(n).encode())
        if tags[slot] is None:
            tags[slot] = str(n)
            missing -= 1
        n += 1
    return tuple(t or "" for t in tags)


def warm() -> None:
    """Work every process of a cluster deployment needs, done once before a worker forks its
    pool so that each pool process inherits it (``config.celery``)."""
    if clustered():
        _slot_tags()


def slot_tag(slot: int) -> str:
    """A hash tag (with its braces) whose keys live in ``slot``."""
    return "{" + _slot_tags()[slot] + "}"


def primaries() -> list[Any]:
    """The cluster's primary nodes (redis-py ``ClusterNode``s); empty on a single Redis."""
    client: Any = get_redis()
    return list(client.get_primaries()) if clustered() else []


def ping_all() -> None:
    """PING every node that holds data (each primary of a cluster); raises if one does not."""
    client: Any = get_redis()
    if clustered():
        client.ping(target_nodes=RedisCluster.PRIMARIES)
    else:
        client.ping()


def get_redis_nodes() -> list[Any]:
    """Every node the cluster client knows (primaries and replicas); empty on a single Redis."""
    client: Any = get_redis()
    return list(client.get_nodes()) if clustered() else []


def run_id() -> str:
    """Which Redis run serves the data: INFO's ``run_id``, new at every start. On a cluster the
    primaries' run_ids, sorted: a failover (a replica promoted) or a restart changes it too."""
    client: Any = get_redis()
    if not clustered():
        return str(client.info("server")["run_id"])
    found = client.info("server", target_nodes=_serving_primaries(client))
    return ",".join(sorted(str(info["run_id"]) for info in found.values()))


def _serving_primaries(client: Any) -> list[Any]:
    """The primaries as the cluster sees them now (``CLUSTER NODES``), not as this process's slot
    map last saw them: after a frozen master's replica took over, the map keeps the old master
    as a primary until some command meets a MOVED, and that master's run_id (frozen, not
    restarted) hid the failover from ``storage.counters.epoch`` (measured: the same three
    run_ids before and after a 6-s freeze that failed a master over)."""
    names = [name for name, node in client.cluster_nodes().items() if _serves(node)]
    nodes = [client.get_node(node_name=name) for name in names]
    if None in nodes:  # a node this process has not met yet
        client.nodes_manager.initialize()
        nodes = [client.get_node(node_name=name) for name in names]
    return [node for node in nodes if node is not None]


def _serves(node: dict[str, Any]) -> bool:
    flags = set(str(node["flags"]).split(","))
    return "master" in flags and "fail" not in flags and bool(node["slots"])
