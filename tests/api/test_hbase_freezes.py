"""The HBase Thrift gateways frozen under an API process that reads its history from the HBase
inbox, on the production server (gunicorn + uvicorn serving ``config.asgi``) and the real
services (``scripts/services freeze hbase-thrift``: SIGSTOP, connections open, nothing answers;
thawed in a finally).

The process has read the inbox's region map first, as a running one has: a call about one row
then goes through the breaker of the RegionServer serving it (infra/hbase.py), so one dead
RegionServer fails only its own rows. A frozen gateway is no RegionServer's fault: history reads
of users whose rows are on every RegionServer each answer 503 within the API's deadline, and once
the gateway is known to be out, at once. Once thawed, every read answers 200 again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.api.factories import inbox_api, send_api
from tests.api.test_freezes import Answer, assert_unavailable_in_time, call, get, report
from tests.config.test_asgi import api_server
from tests.conftest import services, wait_for

pytestmark = [pytest.mark.faults, pytest.mark.hbase_faults]
Uids = Callable[[int], list[int]]
FROZEN_S = 6.0
READERS = 24  # the inbox has 16 regions over 3 RegionServers: rows on each of them


@pytest.fixture
def hbase_inbox_server(transactional_db: Any) -> Iterator[int]:
    with api_server(INBOX_BACKEND="hbase") as port:
        yield port


def test_gateways_frozen_history_on_every_regionserver_is_503_in_time(
    hbase_inbox_server: int, uids: Uids
) -> None:
    port = hbase_inbox_server
    sender, *readers = uids(READERS + 1)
    sending = send_api("shop-hbase-freeze", [sender]).token
    for n, reader in enumerate(readers):
        body = {
            "sender_uid": sender,
            "receiver_uid": reader,
            "content": {"type": "text", "text": "hi"},
            "client_msg_id": f"hf-{n}",
        }
        assert call(port, "POST", "/messages", sending, body).status == 201
    token = inbox_api("bff-hbase-freeze").token

    def histories() -> list[Answer]:
        return [get(port, f"/users/{r}/conversations/{sender}/messages", token) for r in readers]

    assert {a.status for a in histories()} == {200}
    time.sleep(2.5)  # the region map, read after the first calls, is in use by now
    assert {a.status for a in histories()} == {200}
    services("freeze", "hbase-thrift")
    try:
        started, during = time.monotonic(), []
        while time.monotonic() - started < FROZEN_S:
            during += histories()
    finally:
        services("thaw", "hbase-thrift")
    report("HBase gateways frozen: history of readers on every RegionServer", during)
    assert_unavailable_in_time(during)
    assert max(a.seconds for a in during[READERS:]) < 0.5  # known to be out: fail fast
    wait_for(lambda: {a.status for a in histories()} == {200}, timeout=30, every=0.5)
