"""The live HTTP endpoints on a real gateway: tokens (validation, scopes) and presence, which
follows devices connecting and leaving on either gateway process."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

import pytest

from api.models import Scope
from tests.api.factories import make_api
from tests.conftest import wait_for
from tests.live.conftest import HEARTBEAT_S, Http, Opener

pytestmark = pytest.mark.live
Backend = tuple[Http, Http]


def test_a_token_is_minted_for_a_device_with_its_url(backend: Backend, uids: Any) -> None:
    (bob,) = uids(1)
    status, body = backend[0].call("POST", f"/users/{bob}/live-tokens", {"device_id": "ph.1_A-b"})
    assert status == 201
    query = urlencode({"token": body["token"]})
    assert body["url"] == f"ws://127.0.0.1:{backend[0].port}/live/v1?{query}"
    assert body["expires_at"]


@pytest.mark.parametrize("device_id", ["", "a" * 65, "bad id", "é", None, ["x"], True])
def test_a_bad_device_id_answers_400(backend: Backend, uids: Any, device_id: Any) -> None:
    (bob,) = uids(1)
    status, body = backend[0].call("POST", f"/users/{bob}/live-tokens", {"device_id": device_id})
    assert status == 400
    assert body["error"] == "invalid"
    assert body["detail"]


def test_tokens_and_presence_need_the_users_or_inbox_scope(backend: Backend, uids: Any) -> None:
    (bob,) = uids(1)
    sender = Http(backend[0].port, make_api("live-sender", [Scope.SEND], [bob]).token)
    assert sender.call("POST", f"/users/{bob}/live-tokens", {"device_id": "x"})[0] == 403
    assert sender.call("GET", f"/users/{bob}/presence")[0] == 403
    inbox = Http(backend[0].port, make_api("live-inbox", [Scope.INBOX]).token)
    assert inbox.call("POST", f"/users/{bob}/live-tokens", {"device_id": "x"})[0] == 201
    assert backend[0].call("GET", "/users/nope/presence")[0] == 400


def test_presence_lists_connected_devices_on_any_gateway_and_forgets_them(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    (bob,) = uids(1)
    assert backend[0].ok("GET", f"/users/{bob}/presence") == {"online": False, "devices": []}
    phone = open_device(backend[0].port, backend[0].token_for(bob, "phone"))
    tablet = open_device(backend[1].port, backend[0].token_for(bob, "tablet"))

    shown = backend[1].ok("GET", f"/users/{bob}/presence")
    assert shown["online"] is True
    assert [d["device_id"] for d in shown["devices"]] == ["phone", "tablet"]
    assert all(d["connected_at"] for d in shown["devices"])

    phone.close()
    wait_for(lambda: len(backend[0].ok("GET", f"/users/{bob}/presence")["devices"]) == 1, 10)
    tablet.close()
    wait_for(lambda: not backend[0].ok("GET", f"/users/{bob}/presence")["online"], 10)


def test_a_connected_device_stays_present_past_its_presence_ttl_through_heartbeats(
    backend: Backend, uids: Any, open_device: Opener
) -> None:
    (bob,) = uids(1)
    phone = open_device(backend[0].port, backend[0].token_for(bob, "phone"))
    phone.quiet(4 * HEARTBEAT_S)  # the presence entry alone would have expired after 3
    assert backend[1].ok("GET", f"/users/{bob}/presence")["online"] is True
