"""``Idempotency-Key`` on ``POST /announcements`` and ``POST /audiences``: a retried publish or
upload answers the original (200) and is published or stored once; the same key with another body
is a 409; another client's key is its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from api.models import Scope
from bulk.models import Audience
from tests.api.factories import ClientApi, inbox_api, make_api
from unread.models import Announcement

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


def publish(api: ClientApi, text: str, key: str) -> tuple[int, Any]:
    response = api.http.post(
        "/api/v1/announcements",
        json.dumps({"content": text}),
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY=key,
    )
    return response.status_code, response.json()


def upload(api: ClientApi, content: bytes, key: str) -> tuple[int, Any]:
    response = api.http.post(
        "/api/v1/audiences?name=spring",
        {"file": SimpleUploadedFile("uids.txt", content)},
        format="multipart",
        HTTP_IDEMPOTENCY_KEY=key,
    )
    return response.status_code, response.json()


def test_a_retried_announcement_is_published_once_and_answers_the_original(uid: int) -> None:
    ops = make_api("ops-idem", [Scope.ANNOUNCE])
    before = Announcement.objects.count()
    first = publish(ops, "Maintenance at 02:00 UTC", "ann-2026-11-24")
    again = publish(ops, "Maintenance at 02:00 UTC", "ann-2026-11-24")
    assert (first[0], again[0]) == (201, 200)
    assert again[1] == first[1]
    assert Announcement.objects.count() == before + 1
    assert inbox_api("bff-idem").unread(uid)["announcements"] == 1

    status, body = publish(ops, "Maintenance at 03:00 UTC", "ann-2026-11-24")
    assert status == 409
    assert body["error"] == "conflict"
    other = make_api("ops-idem-2", [Scope.ANNOUNCE])
    assert publish(other, "Maintenance at 03:00 UTC", "ann-2026-11-24")[0] == 201


def test_a_retried_upload_is_stored_once_and_answers_the_original(uids: Uids) -> None:
    api = make_api("shop-idem", [Scope.CAMPAIGNS], uids(1))
    lines = "\n".join(str(u) for u in uids(3)).encode() + b"\nnot-a-uid\n"
    first = upload(api, lines, "upload-1")
    again = upload(api, lines, "upload-1")
    assert (first[0], again[0]) == (201, 200)
    assert again[1] == first[1]
    assert first[1]["count"] == 3
    assert Audience.objects.filter(client=api.client).count() == 1

    status, body = upload(api, lines + b"42\n", "upload-1")
    assert status == 409
    assert body["error"] == "conflict"
    assert Audience.objects.filter(client=api.client).count() == 1
    assert upload(api, lines, "upload-2")[0] == 201  # a new key is a new upload
