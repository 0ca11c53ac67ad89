"""``POST /audiences``: a uid list uploaded as multipart or as a raw body, streamed whatever its
size; bad lines are counted with samples, an upload with no valid uid is refused and not kept."""

from __future__ import annotations

import pytest
from django.test import override_settings

from bulk.models import Audience, AudienceMember
from tests.api.factories import API
from tests.bulk.helpers import Uids, campaigns_api, upload

pytestmark = pytest.mark.django_db


# -- uploads --------------------------------------------------------------------------------------
def test_binary_garbage_lines_are_counted_invalid_with_samples(uids: Uids) -> None:
    sender, a, b = uids(3)
    api = campaigns_api(sender)
    garbage = b"\x00\xff\xfe\x89PNG\x1a"
    content = b"\n".join([str(a).encode(), garbage, b"\xc3\x28\x00", str(b).encode(), b"12 34"])

    status, stored = upload(api, content)

    assert status == 201, stored
    assert (stored["count"], stored["invalid_lines"]) == (2, 3)
    assert [s["line"] for s in stored["invalid_samples"]] == [2, 3, 5]
    assert {s["reason"] for s in stored["invalid_samples"]} == {"not a positive integer"}
    assert stored["invalid_samples"][2]["text"] == "12 34"


def test_a_utf8_bom_does_not_make_the_first_uid_invalid(uids: Uids) -> None:
    sender, a, b = uids(3)
    api = campaigns_api(sender)

    status, stored = upload(api, b"\xef\xbb\xbf" + f"{a}\r\n{b}\r\n".encode())

    assert status == 201, stored
    assert (stored["count"], stored["invalid_lines"]) == (2, 0)
    assert set(
        AudienceMember.objects.filter(audience_id=stored["id"]).values_list("uid", flat=True)
    ) == {a, b}


def test_an_upload_without_any_valid_uid_answers_400_and_stores_nothing(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])
    before = Audience.objects.count()

    status, answer = upload(api, b"\x00\x01\x02\nabc\n-7\n")
    empty_status, empty = upload(api, b"")
    blank_status, blank = upload(api, b"\n \n\r\n")

    assert status == 400, answer
    assert answer["error"] == "invalid"
    assert answer["fields"] == {"file": "line 1: not a positive integer"}
    assert (empty_status, empty["error"]) == (400, "invalid")
    assert (blank_status, blank["error"]) == (400, "invalid")
    assert Audience.objects.count() == before


def test_a_raw_text_plain_body_is_an_upload_too(uids: Uids) -> None:
    sender, a, b = uids(3)
    api = campaigns_api(sender)

    status, stored = api.raw(
        "POST",
        "/audiences",
        f"{a}\n{b}\n".encode(),
        content_type="text/plain",
        query={"name": "vip"},
    )
    empty_status, empty = api.raw("POST", "/audiences", b"", content_type="text/plain")

    assert status == 201, stored
    assert stored["count"] == 2
    assert Audience.objects.get(pk=stored["id"]).name == "vip"
    assert set(
        AudienceMember.objects.filter(audience_id=stored["id"]).values_list("uid", flat=True)
    ) == {a, b}
    assert (empty_status, empty["fields"]) == (400, {"file": "empty"})


@pytest.mark.parametrize("content_type", ["text/csv", "application/octet-stream"])
def test_a_raw_csv_or_binary_body_is_an_upload_too(uids: Uids, content_type: str) -> None:
    """What ``curl --data-binary @uids.csv -H 'Content-Type: text/csv'`` sends."""
    sender, a, b = uids(3)
    api = campaigns_api(sender)

    lines = f"{a}\r\n{b}\r\n{a}\r\n".encode()
    status, stored = api.raw("POST", "/audiences", lines, content_type=content_type)

    assert status == 201, stored
    assert (stored["count"], stored["duplicate_lines"]) == (2, 1)


def test_a_malformed_multipart_body_answers_400_malformed(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    status, answer = api.raw("POST", "/audiences", b"123\n", content_type="multipart/form-data")

    assert status == 400, answer
    assert answer["error"] == "malformed"
    assert "file" in answer["fields"]
    assert not Audience.objects.exists()


def test_an_upload_without_a_file_field_or_of_another_type_is_refused(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])

    missing = api.http.post(f"{API}/audiences", {"name": "x"}, format="multipart")
    as_json = api.call("POST", "/audiences", {"uids": [1, 2]})

    assert missing.status_code == 400
    assert "file" in missing.json()["fields"]
    assert as_json[0] == 415
    assert as_json[1]["error"] == "unsupported_media_type"


@override_settings(BULK_UPLOAD_MAX_BYTES=1000)
def test_an_upload_over_the_limit_answers_413(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])
    content = b"".join(f"{10**12 + i}\n".encode() for i in range(100))  # 1,400 bytes

    status, answer = upload(api, content)
    raw_status, raw = api.raw("POST", "/audiences", content, content_type="text/plain")

    assert (status, answer["error"]) == (413, "too_large")
    assert (raw_status, raw["error"]) == (413, "too_large")
    assert not Audience.objects.exists()


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1024, FILE_UPLOAD_MAX_MEMORY_SIZE=1024)
def test_uploads_far_over_djangos_memory_limits_stream_through(uids: Uids) -> None:
    api = campaigns_api(uids(1)[0])
    content = b"".join(f"{10**12 + i}\n".encode() for i in range(20_000))  # 280 kB

    status, stored = upload(api, content)
    raw_status, raw = api.raw("POST", "/audiences", content, content_type="text/plain")

    assert status == 201, stored
    assert raw_status == 201, raw
    assert stored["count"] == raw["count"] == 20_000


def test_a_huge_line_without_newline_is_one_invalid_line(uids: Uids) -> None:
    sender, a = uids(2)
    api = campaigns_api(sender)
    content = f"{a}\n".encode() + b"7" * 300_000 + b"\n" + b" " * 5000 + b"\n"

    status, stored = upload(api, content)

    assert status == 201, stored
    assert (stored["count"], stored["invalid_lines"]) == (1, 2)
    assert [s["line"] for s in stored["invalid_samples"]] == [2, 3]
