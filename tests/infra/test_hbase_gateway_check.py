"""The HBase gateway check (infra/hbase.py, ``GatewayCheck``) on the real gateway behind
toxiproxy: black-holed (a ``timeout`` toxic: nothing passes, nothing is closed), the gateway is
marked out and its breaker opened; once the path answers again, the check closes the breaker it
opened, so the next call goes through instead of waiting for the breaker's own ping and probe
(history reads answered 503 for 0.6-1.4 s after a thaw before).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from infra import breakers, hbase
from infra.hbase import gateway_check
from tests.api.test_network_faults import hbase_proxy, toxic
from tests.conftest import wait_for

__all__ = ["hbase_proxy"]  # the fixture, imported for pytest
pytestmark = pytest.mark.faults


@pytest.fixture
def proxied_gateway(hbase_proxy: tuple[str, int]) -> Iterator[str]:
    """This process's HBase calls through the proxy (0.5-s timeout); the proxy's name."""
    proxied = {**settings.HBASE, "PORT": hbase_proxy[1], "TIMEOUT_MS": 500}
    with override_settings(HBASE=proxied):
        hbase.reset_pools()
        breakers.reset()
        yield hbase_proxy[0]
    wait_for(lambda: not gateway_check.running, timeout=10)  # its thread used the proxy
    hbase.reset_pools()
    breakers.reset()


def test_a_gateway_found_answering_again_closes_the_breaker_its_check_opened(
    proxied_gateway: str,
) -> None:
    assert hbase.call(lambda conn: conn.tables()) is not None
    with toxic(proxied_gateway, "timeout", "downstream", timeout=0):
        gateway_check.soon()  # what a row read that got no answer does
        wait_for(lambda: gateway_check.out, timeout=10)
        assert not breakers.closed("hbase")
        with pytest.raises(breakers.StoreOpen):
            hbase.call(lambda conn: conn.tables())  # fails at once: known to be out
    wait_for(lambda: not gateway_check.out, timeout=10)
    assert breakers.closed("hbase"), "the check left the breaker it opened to its own probe"
    assert hbase.call(lambda conn: conn.tables()) is not None
