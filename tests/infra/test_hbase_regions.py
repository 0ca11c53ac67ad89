"""The test HBase runs three RegionServers (scripts/services: a JVM each, ``HBASE_REGIONSERVERS``),
and ``hbase_init``'s 16 salt regions spread over all of them."""

from __future__ import annotations

from collections import Counter

import pytest

from infra import hbase
from infra.hbase_tables import SALT_SPLITS, full_name

pytestmark = pytest.mark.hbase


def test_the_inbox_regions_are_served_by_three_regionservers() -> None:
    regions = hbase.call(lambda conn: conn.client.getTableRegions(full_name("inbox")))
    servers = Counter((r.serverName, r.port) for r in regions)
    assert len(regions) == len(SALT_SPLITS) + 1
    assert len(servers) == 3
