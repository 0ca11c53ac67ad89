"""A write refused by the client's rate carries the IETF ``RateLimit-*`` fields beside
``Retry-After``, so a client library can back off without parsing the body."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from django.test import override_settings

from tests.api.factories import send_api

pytestmark = pytest.mark.django_db


def test_a_429_names_the_limit_what_is_left_and_when_it_resets(
    uids: Callable[[int], list[int]],
) -> None:
    alice, bob = uids(2)
    sender = send_api("rate-headers", [alice])
    with override_settings(API_WRITE_RATE_PER_S=0.5, API_WRITE_BURST=2):
        assert sender.send(alice, bob, "one")[0] == 201
        assert sender.send(alice, bob, "two")[0] == 201
        refused = sender.http.post(
            "/api/v1/messages",
            {
                "sender_uid": alice,
                "receiver_uid": bob,
                "client_msg_id": "three",
                "content": {"type": "text", "text": "three"},
            },
            format="json",
        )
    assert refused.status_code == 429
    assert refused["RateLimit-Limit"] == "2"
    assert refused["RateLimit-Remaining"] == "0"
    assert refused["RateLimit-Reset"] == refused["Retry-After"]
    assert 1 <= int(refused["RateLimit-Reset"]) <= 2
