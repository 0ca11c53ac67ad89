"""Counters that survive a Redis crash: notice the restart, repair each user on their next read.

Redis persists with AOF (``appendfsync everysec``: scripts/services), so a Redis killed with -9
comes back with all but its last second of writes, and one that lost its files comes back empty.
Either way some users' counters may be behind the truth (inbox entries after each conversation's
read position), and nothing else would ever correct them.

- **Detection** (``check_restart``, the beat task ``unread.counters_check`` every 5 s): Redis's
  ``run_id`` changes at every start (on a Redis Cluster: the primaries' run_ids, so a failover
  counts too: the promoted replica may miss its master's last writes). When it differs from the
  one recorded in ``counters:run_id`` (or that key is gone with the rest of the data) the
  counters' epoch moves to a new random token.
- **Repair, lazily** (``ensure_fresh``): a read of a user's counters (the unread summary, the
  conversation list; the unread fast path hands such a request to Django) first compares the
  user's ``unread:v:{u:<uid>}`` with the epoch; if they differ the user's counters are rebuilt
  from the truth and marked verified. The rebuild is the counters' owner's, ``unread``'s
  (``unread/rebuild.py``: each conversation's read position plus the inbox, one Lua replace),
  so this floor imports no app: ``UnreadConfig.ready`` binds it with ``bind_rebuild``, and a
  read before that (``unread`` missing from INSTALLED_APPS) raises instead of showing counters
  nothing can repair. Each user costs one rebuild per epoch; ``missive_unread_repairs_total``
  counts them.
- No epoch at all (a new Redis that no check has seen yet) means nothing to repair.
- On a Redis Cluster the epoch is one key on one master: when that master does not answer, the
  read serves the user's counters as their own master holds them and checks again next time
  (``infra.outages.global_key_unanswered``), rather than refusing every user on the healthy
  masters until the cluster fails over.
- **A repair that cannot run** because a store it reads (MariaDB, the inbox's HBase) does not
  answer is put off, not turned into an error: the read serves the counters as Redis holds them
  (exact unless Redis lost its last second of writes), the user stays unverified, and their next
  read repairs. Before, such a read answered 503, so a frozen MariaDB or HBase took the unread
  fast path down for every user not read since the epoch moved (all of them after a restart):
  653 of 654 unread reads answered 503 in scripts/fault_drill.py's 30-s MariaDB freeze.
  ``missive_unread_repairs_deferred_total`` counts them.

A repair that a delivery or a read to the same user overtakes (the counters changed between the
start of its recount and its replace) recounts; after three such tries it leaves the counters as
the writes made them and the user unverified, and a later read repairs (``unread/rebuild.py``).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from pybreaker import CircuitBreakerError

from infra import breakers, metrics
from infra.logs import warn_sparsely
from infra.outages import global_key_unanswered
from infra.redis import get_redis
from infra.redis import run_id as redis_run_id
from infra.store_errors import store_unavailable
from storage.counters import keys
from storage.counters.store import CountersChanged

log = logging.getLogger(__name__)
VERIFIED_TTL_S = 30 * 24 * 3600  # a user idle longer is simply rebuilt again on return
T = TypeVar("T")
Rebuild = Callable[[int], object]  # recompute one user's counters from the truth
_bound: list[Rebuild] = []


def check_restart() -> bool:
    """Move the epoch on if Redis restarted since the last check; True when it did."""
    client = get_redis()
    run_id = redis_run_id()
    recorded = client.get(keys.RUN_ID)
    if recorded in (run_id, run_id.encode()):
        return False
    pipe = client.pipeline(transaction=False)
    pipe.set(keys.EPOCH, secrets.token_hex(8))
    pipe.set(keys.RUN_ID, run_id)
    pipe.execute()
    metrics.inc("counters_epochs")
    if recorded is not None:  # not the first check of a new Redis
        log.warning("counters: Redis restarted; every user's counters are repaired on next read")
    return True


def bind_rebuild(rebuild: Rebuild) -> None:
    """Called from ``UnreadConfig.ready``: how ``ensure_fresh`` repairs a user."""
    _bound[:] = [rebuild]


def _rebuild() -> Rebuild:
    if not _bound:
        raise RuntimeError(
            "The unread counters were read before unread bound their rebuild "
            "(storage.counters.epoch.bind_rebuild, in UnreadConfig.ready: is 'unread' in "
            "INSTALLED_APPS?)"
        )
    return _bound[0]


def ensure_fresh(uid: int) -> bool:
    """Rebuild ``uid``'s counters if they predate the epoch; True when they were rebuilt."""
    rebuild = _rebuild()  # checked on every read, not only on the rare one after a restart
    client = get_redis()
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.EPOCH)
    pipe.get(keys.verified(uid))
    epoch, mark = pipe.execute(raise_on_error=False)  # a cluster's nodes fail one by one
    if isinstance(mark, Exception):  # the user's own node: their counters cannot be read either
        raise mark
    if isinstance(epoch, Exception):  # the epoch's node did not answer: served as Redis holds
        global_key_unanswered(epoch, "epoch")  # them, repaired on a later read if due
        return False
    if epoch is None or mark == epoch:
        return False

    def repaired() -> bool:
        try:
            rebuild(uid)
        except CountersChanged:  # writes kept landing during each recount: a later read repairs
            return False
        return True

    if not put_off(repaired, False):
        return False
    client.set(keys.verified(uid), epoch, ex=VERIFIED_TTL_S)
    metrics.inc("unread_repairs")
    return True


REPAIRS = "unread-repairs"  # the breaker of the repairs a read may put off (``put_off``)
breakers.configure(
    REPAIRS, lambda: {"fail_max": 1, "reset_timeout": settings.UNREAD_REPAIRS_PUT_OFF_S}
)


def put_off(repair: Callable[[], T], otherwise: T) -> T:
    """``repair()``, or ``otherwise`` when a store the repair reads (MariaDB, HBase) does not
    answer: the read then serves what Redis holds and a later read repairs (module docstring).
    Also groups' repairs of a member's positions and a group's head (``groups.selectors``).
    Counted in ``missive_unread_repairs_deferred_total``; one WARNING per process per 10 s.

    After one repair met an outage, the process puts every repair off for UNREAD_REPAIRS_PUT_OFF_S
    (the ``unread-repairs`` breaker, open), then lets one try. Before, with a RegionServer
    killed, HBase's own breaker stayed closed (the reads of the other RegionServers' rows
    answered) and each read whose repair touched a dead region waited the 2-s timeout
    (tests/bulk/test_regionserver_crash.py: three such reads 2.04, 2.01, 0.005 s; now 2.05,
    0.00, 0.00 s), although the unread answer itself needs no HBase."""
    gate = breakers.breaker(REPAIRS)
    try:
        return gate.call(repair)
    except Exception as exc:
        if not (isinstance(exc, CircuitBreakerError) or store_unavailable(exc)):
            raise
        metrics.inc("unread_repairs_deferred")
        warn_sparsely(
            log,
            "deferred",
            "unread repairs put off while a store does not answer; counts are served as "
            "Redis holds them: %r",
            exc,
        )
        return otherwise
