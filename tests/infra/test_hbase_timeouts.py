"""A scan whose HBase Thrift gateway stops answering mid-way fails after one timeout, not two
(infra/hbase.py: happybase's closing of the scanner no longer waits on the same silent
connection), on the real gateway black-holed by toxiproxy (a ``timeout`` toxic: nothing passes,
nothing is closed) with a 0.5-s Thrift timeout.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from thriftpy2.transport import TTransportException

from infra import breakers, hbase
from tests.api.test_network_faults import hbase_proxy, toxic

__all__ = ["hbase_proxy"]  # the fixture, imported for pytest
pytestmark = pytest.mark.faults


def test_a_scan_the_gateway_stops_answering_mid_way_waits_for_one_timeout_not_two(
    hbase_proxy: tuple[str, int],
) -> None:
    """A scan whose next batch gets no answer (the path black-holed after its first batch, as
    when the RegionServer holding the rest dies): the scan fails after one Thrift timeout. It
    used to wait a second one: happybase closes its scanner over the same silent connection."""
    table = b"scan_probe"  # under the tests' table prefix; made with the usual timeout
    hbase.call(lambda conn: table in conn.tables() or conn.create_table(table, {"d": {}}))
    hbase.call(lambda conn: [conn.table(table).put(b"r%d" % i, {b"d:x": b"1"}) for i in range(3)])
    proxied = {**settings.HBASE, "PORT": hbase_proxy[1], "TIMEOUT_MS": 500}
    with override_settings(HBASE=proxied):
        hbase.reset_pools()
        breakers.reset()

        def scan(conn: Any) -> list[Any]:
            rows = conn.table(table).scan(batch_size=1)
            first = next(rows)
            with toxic(hbase_proxy[0], "timeout", "downstream", timeout=0):
                return [first, *rows]

        started = time.monotonic()
        with pytest.raises((TTransportException, TimeoutError)):
            hbase.call(scan)
        seconds = time.monotonic() - started
    hbase.reset_pools()
    breakers.reset()
    assert 0.4 <= seconds < 0.9, f"{seconds:.2f} s"
