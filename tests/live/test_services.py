"""Live delivery's storage on whichever Redis the suite runs on (a single Redis, and the Redis
Cluster in make test's cluster pass, where a call for many users spans many slots): only the
recently online get log entries, and a device resumes from its cursor with every missed event
in order, or is told to resync."""

from __future__ import annotations

import json
from typing import Any

from django.test import override_settings

from infra.redis import get_redis
from live import keys, services


def frames(opened: services.Opened) -> list[dict[str, Any]]:
    return [json.loads(entry.text) for entry in opened.missed]


def test_a_batch_logs_for_the_recently_online_only_and_a_device_resumes_in_order(
    uids: Any,
) -> None:
    online, recent, never, *others = uids(40)  # many uids: many slots on a cluster
    start = services.connection_open(uid=online, device_id="phone", since=None)
    services.connection_open(uid=recent, device_id="tablet", since=None)
    services.connection_close(uid=recent, device_id="tablet")

    for n in range(3):
        services.publish_many([never, online, *others, recent], {"type": "read", "n": n})

    assert not get_redis().exists(keys.log(never))
    again = services.connection_open(uid=recent, device_id="tablet", since=start.cursor)
    assert again.resync == "lost"  # another user's cursor: not this log's epoch
    resumed = services.connection_open(uid=online, device_id="phone", since=start.cursor)
    assert resumed.resumed
    assert [f["n"] for f in frames(resumed)] == [0, 1, 2]
    assert len({f["cursor"] for f in frames(resumed)}) == 3
    assert resumed.head == start.head + 3


def test_a_cursor_the_log_no_longer_holds_is_too_old_and_a_lost_log_is_lost(uids: Any) -> None:
    (uid,) = uids(1)
    start = services.connection_open(uid=uid, device_id="phone", since=None)
    with override_settings(LIVE_LOG_MAXLEN=3):
        for n in range(5):
            services.publish(uid, {"type": "read", "n": n})
    assert services.connection_open(uid=uid, device_id="p", since=start.cursor).resync == "too_old"

    latest = services.connection_open(uid=uid, device_id="phone", since=None).cursor
    get_redis().delete(keys.meta(uid))
    assert services.connection_open(uid=uid, device_id="p", since=latest).resync == "lost"
    assert services.connection_open(uid=uid, device_id="p", since="garbage").resync == "lost"
