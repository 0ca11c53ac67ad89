"""What the messaging API answers to bad tokens, missing scopes and bad input: always the JSON
error shape ``{"error", "detail", "fields"?}`` with a 4xx, never a 500, and nothing stored."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from django.test import RequestFactory, override_settings
from django.utils import timezone

from api.clients import GENERATION_KEY, api_clients_changed, api_clients_revoke
from api.errors import Conflict, RateLimited, TooLarge
from api.exceptions import api_exception_handler, api_server_error, flatten
from api.models import ApiClient
from infra.redis import get_redis
from messaging.models import ClientMessage, Message
from tests.api.factories import API, Api, inbox_api, make_api, send_api

pytestmark = pytest.mark.django_db

MAX_ID = (1 << 63) - 1
DEEP = b"[" * 20000 + b"]" * 20000  # 40 KB: under the size limit, past the parser's recursion
FULLWIDTH_12 = "\uff11\uff12"


def body_for(pair: tuple[int, int], **change: Any) -> dict[str, Any]:
    body = {
        "sender_uid": pair[0],
        "receiver_uid": pair[1],
        "content": {"type": "text", "text": "hello"},
        "client_msg_id": "c1",
    }
    body.update(change)
    return {k: v for k, v in body.items() if v is not MISSING}


MISSING = object()


def assert_error(result: tuple[int, Any], status: int, code: str, field: str | None = None) -> None:
    got_status, body = result
    assert got_status == status, body
    assert body["error"] == code
    assert isinstance(body["detail"], str)
    assert body["detail"]
    if field is not None:
        assert field in body["fields"], body


# -- authentication ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "header",
    [
        None,
        "Bearer",
        "Bearer nope",
        "Token abc",
        "Bearer a b",
        "Basic dXNlcjpwYXNz",
        "Bearer " + "x" * 400,
    ],
)
def test_missing_or_bad_token_is_401(header: str | None, uid: int) -> None:
    api = Api(None)
    if header is not None:
        api.http.credentials(HTTP_AUTHORIZATION=header)
    result = api.call("GET", f"/users/{uid}/unread")
    assert_error(result, 401, "unauthorized")


def test_401_names_the_bearer_scheme(uid: int) -> None:
    response = Api(None).http.get(f"/api/v1/users/{uid}/unread")
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_revoked_and_inactive_clients_are_401_at_once(uid: int) -> None:
    revoked, inactive = inbox_api("revoked"), inbox_api("inactive")
    for api in (revoked, inactive):  # both principals are now cached by this process
        assert api.call("GET", f"/users/{uid}/unread")[0] == 200
    assert api_clients_revoke(client_ids=[revoked.client.pk]) == 1
    ApiClient.objects.filter(pk=inactive.client.pk).update(is_active=False)
    api_clients_changed()  # what code that edits clients directly must do
    assert_error(revoked.call("GET", f"/users/{uid}/unread"), 401, "unauthorized")
    assert_error(inactive.call("GET", f"/users/{uid}/unread"), 401, "unauthorized")
    assert ApiClient.objects.get(pk=revoked.client.pk).revoked_at is not None


def test_a_lost_client_version_never_revives_a_cached_principal(uid: int) -> None:
    api = inbox_api("cached")
    assert api.call("GET", f"/users/{uid}/unread")[0] == 200  # cached under the first version
    api_clients_revoke(client_ids=[api.client.pk])
    get_redis().delete(GENERATION_KEY)  # as after a Redis restart
    assert_error(api.call("GET", f"/users/{uid}/unread"), 401, "unauthorized")


def test_a_known_token_costs_no_sql_query(uid: int, django_assert_num_queries: Any) -> None:
    api = inbox_api("hot")
    assert api.call("GET", f"/users/{uid}/unread")[0] == 200
    with django_assert_num_queries(0):  # the unread hot path: Redis only
        assert api.call("GET", f"/users/{uid}/unread")[0] == 200


def test_only_the_token_hash_is_stored() -> None:
    api = inbox_api("hashed")
    row = ApiClient.objects.get(pk=api.client.pk)
    assert api.token not in (row.token_hash, row.token_prefix)
    assert api.token.startswith(row.token_prefix)
    assert len(row.token_hash) == 64


# -- scopes and ownership -------------------------------------------------------------------------
def test_send_scope_cannot_read_inboxes(pair: tuple[int, int], sender: Api) -> None:
    alice, bob = pair
    sender.sent(alice, bob)
    assert_error(sender.call("GET", f"/users/{alice}/conversations"), 403, "forbidden")
    assert_error(sender.call("GET", f"/users/{bob}/unread"), 403, "forbidden")
    assert_error(sender.call("DELETE", f"/users/{bob}/messages"), 403, "forbidden")


def test_inbox_scope_cannot_send(pair: tuple[int, int], bff: Api) -> None:
    assert_error(bff.call("POST", "/messages", body_for(pair)), 403, "forbidden")
    assert not ClientMessage.objects.exists()


def test_campaign_or_announce_scopes_grant_nothing_here(pair: tuple[int, int]) -> None:
    other = make_api("marketing", ["campaigns", "announce"], pair)
    assert_error(other.call("POST", "/messages", body_for(pair)), 403, "forbidden")
    assert_error(other.call("GET", f"/users/{pair[0]}/unread"), 403, "forbidden")


def test_sending_as_another_clients_sender_is_404(
    pair: tuple[int, int], uids: Callable[[int], list[int]]
) -> None:
    send_api("owner", [pair[0]])
    intruder = send_api("intruder", uids(1))
    result = intruder.call("POST", "/messages", body_for(pair))
    assert_error(result, 404, "not_found", "sender_uid")
    assert not Message.objects.exists()


def test_recall_within_the_window_by_the_senders_client(pair: tuple[int, int], sender: Api) -> None:
    key = sender.sent(*pair)
    assert sender.recall(key) == (200, {"msgkey": key, "status": "recalled"})


def test_recall_of_an_expired_message_is_403(pair: tuple[int, int], sender: Api) -> None:
    key = sender.sent(*pair)
    Message.objects.filter(msgkey=int(key)).update(
        created_at=timezone.now() - timedelta(minutes=2, seconds=1)
    )
    assert_error(sender.recall(key), 403, "forbidden")


# -- send: bad input -------------------------------------------------------------------------------
BAD_IDS = [
    -1,
    0,
    "0",
    "-5",
    "abc",
    "",
    " 12",
    "12 ",
    "1e3",
    "1.0",
    "0x10",
    "١٢",
    1.5,
    1.0,
    True,
    False,
    None,
    [1],
    {"id": 1},
    MAX_ID + 1,
    str(MAX_ID + 1),
    "9" * 30,
    10**400,
]


@pytest.mark.parametrize("field", ["sender_uid", "receiver_uid"])
@pytest.mark.parametrize("value", BAD_IDS, ids=repr)
def test_bad_ids_in_the_body_are_400_naming_the_field(
    field: str, value: Any, pair: tuple[int, int], sender: Api
) -> None:
    assert_error(
        sender.call("POST", "/messages", body_for(pair, **{field: value})), 400, "invalid", field
    )
    assert not ClientMessage.objects.exists()


def test_ids_are_accepted_as_numbers_or_strings(pair: tuple[int, int], sender: Api) -> None:
    alice, bob = pair
    body = body_for(pair, sender_uid=str(alice), receiver_uid=bob)
    status, sent = sender.call("POST", "/messages", body)
    assert status == 201
    assert (sent["sender_uid"], sent["receiver_uid"]) == (str(alice), str(bob))


def test_the_largest_id_is_accepted(uid: int) -> None:
    api = send_api("big", [MAX_ID])
    status, sent = api.send(MAX_ID, uid, "from the top")
    assert status == 201
    assert sent["sender_uid"] == str(MAX_ID)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sender_uid": MISSING}, "sender_uid"),
        ({"receiver_uid": MISSING}, "receiver_uid"),
        ({"content": MISSING}, "content"),
        ({"client_msg_id": MISSING}, "client_msg_id"),
        ({"client_msg_id": ""}, "client_msg_id"),
        ({"client_msg_id": "x" * 65}, "client_msg_id"),
        ({"client_msg_id": 12}, "client_msg_id"),
        ({"client_msg_id": None}, "client_msg_id"),
        ({"client_msg_id": "a\x00b"}, "client_msg_id"),
        ({"content": "hello"}, "content"),
        ({"content": ["text", "hello"]}, "content"),
        ({"content": None}, "content"),
        ({"content": {"text": "no type"}}, "content.type"),
        ({"content": {"type": "video", "url": "https://x"}}, "content.type"),
        ({"content": {"type": "text"}}, "content.text"),
        ({"content": {"type": "text", "text": ""}}, "content.text"),
        ({"content": {"type": "text", "text": 42}}, "content.text"),
        ({"content": {"type": "text", "text": "x" * 5001}}, "content.text"),
        ({"content": {"type": "text", "text": "😀" * 5001}}, "content.text"),
        (
            {"content": {"type": "image", "url": "ftp://x/y", "width": 1, "height": 1}},
            "content.url",
        ),
        (
            {"content": {"type": "image", "url": "https://x/y", "width": "1", "height": 1}},
            "content.width",
        ),
        ({"content": {"type": "card", "body": "", "url": "https://x"}}, "content.title"),
    ],
    ids=repr,
)
def test_bad_send_bodies_are_400_naming_the_field(
    change: dict[str, Any], field: str, pair: tuple[int, int], sender: Api
) -> None:
    assert_error(sender.call("POST", "/messages", body_for(pair, **change)), 400, "invalid", field)
    assert not Message.objects.exists()


def test_sending_to_yourself_is_400(pair: tuple[int, int], sender: Api) -> None:
    result = sender.call("POST", "/messages", body_for(pair, receiver_uid=pair[0]))
    assert_error(result, 400, "invalid", "receiver_uid")


def test_longest_text_and_other_content_types_are_accepted(
    pair: tuple[int, int], sender: Api
) -> None:
    contents = [
        {"type": "text", "text": "x" * 5000},
        {"type": "image", "url": "https://cdn.example/a.png", "width": 640, "height": 480},
        {"type": "card", "title": "Sale", "body": "", "url": "https://shop.example/"},
    ]
    for i, content in enumerate(contents):
        status, sent = sender.call(
            "POST", "/messages", body_for(pair, content=content, client_msg_id=f"ok-{i}")
        )
        assert status == 201, sent
        assert sent["content"] == content


@pytest.mark.parametrize(
    "raw",
    [
        b"{",
        b"not json",
        b'{"sender_uid": 1,}',
        b"\xff\xfe",
        b'{"a": NaN}',
        b"[" * 20000 + b"]" * 20000,
    ],
    ids=["truncated", "text", "trailing-comma", "not-utf8", "nan", "deep"],
)
def test_invalid_json_is_400_malformed(raw: bytes, sender: Api) -> None:
    assert_error(sender.raw("POST", "/messages", raw), 400, "malformed_json")


def test_a_json_array_body_is_400(pair: tuple[int, int], sender: Api) -> None:
    assert_error(sender.raw("POST", "/messages", json.dumps([body_for(pair)])), 400, "invalid")


def test_an_empty_body_is_400_listing_the_missing_fields(sender: Api) -> None:
    status, body = sender.raw("POST", "/messages", b"")
    assert status == 400
    assert {"sender_uid", "receiver_uid", "content", "client_msg_id"} <= set(body["fields"])


def test_lone_surrogates_are_400_not_500(pair: tuple[int, int], sender: Api) -> None:
    text_body = json.dumps(body_for(pair)).replace('"hello"', '"bad \\ud800 text"')
    assert_error(sender.raw("POST", "/messages", text_body), 400, "invalid", "content")
    id_body = json.dumps(body_for(pair)).replace('"c1"', '"\\udfff"')
    assert_error(sender.raw("POST", "/messages", id_body), 400, "invalid", "client_msg_id")


def test_form_encoded_bodies_are_415(sender: Api) -> None:
    result = sender.raw(
        "POST", "/messages", b"sender_uid=1", content_type="application/x-www-form-urlencoded"
    )
    assert_error(result, 415, "unsupported_media_type")


def test_bodies_over_64_kb_are_413(pair: tuple[int, int], sender: Api) -> None:
    padded = body_for(pair, padding="x" * 70_000)
    assert_error(sender.call("POST", "/messages", padded), 413, "too_large")
    assert not Message.objects.exists()


def test_chunked_bodies_without_a_length_are_411_not_ignored(
    pair: tuple[int, int], sender: Api
) -> None:
    """The WSGI stack reads no byte of a body without Content-Length: rather than answer as if
    it were empty (400 naming every field) or store nothing of a huge one, ask for a length."""
    response = sender.http.generic(
        "POST",
        "/api/v1/messages",
        json.dumps(body_for(pair)),
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        CONTENT_LENGTH="",
    )
    assert response.status_code == 411
    assert json.loads(response.content)["error"] == "length_required"
    assert not Message.objects.exists()


def test_wrong_method_is_405(sender: Api) -> None:
    assert_error(sender.call("GET", "/messages"), 405, "method_not_allowed")


@pytest.mark.parametrize(
    "path", ["/campaigns/", "/messages/", "/users/1/unread/", "/users//unread", "/nope"]
)
def test_unknown_api_urls_are_404_in_the_error_shape(path: str, sender: Api) -> None:
    """A trailing slash or a typo in the path answers JSON like every other API error."""
    response = sender.http.get("/api/v1" + path)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    body = json.loads(response.content)
    assert body["error"] == "not_found"
    assert "/api/v1" + path in body["detail"]


def test_unknown_urls_outside_the_api_keep_djangos_page(sender: Api) -> None:
    response = sender.http.get("/no-such-page")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def test_server_errors_under_the_api_keep_the_error_shape() -> None:
    response = api_server_error(RequestFactory().get("/api/v1/users/1/unread"))
    assert response.status_code == 500
    assert json.loads(response.content)["error"] == "server_error"
    assert api_server_error(RequestFactory().get("/admin/"))["Content-Type"].startswith("text/html")


# -- path and query ids ---------------------------------------------------------------------------
@pytest.mark.parametrize("bad", ["abc", "-1", "0", str(MAX_ID + 1), "1.5", FULLWIDTH_12])
def test_bad_path_ids_are_400_naming_the_field(bad: str, uid: int, bff: Api, sender: Api) -> None:
    assert_error(bff.call("GET", f"/users/{bad}/unread"), 400, "invalid", "uid")
    assert_error(
        bff.call("GET", f"/users/{uid}/conversations/{bad}/messages"), 400, "invalid", "peer_uid"
    )
    assert_error(
        bff.call("DELETE", f"/users/{uid}/conversations/{uid + 1}/messages/{bad}"),
        400,
        "invalid",
        "msgkey",
    )
    assert_error(bff.call("PUT", f"/users/{uid}/blocks/{bad}"), 400, "invalid", "peer_uid")
    assert_error(sender.recall(bad), 400, "invalid", "msgkey")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": "x"}, "limit"),
        ({"limit": -3}, "limit"),
        ({"category": "friends"}, "category"),
        ({"cursor": "zzz"}, "cursor"),
        ({"cursor": "1:"}, "cursor"),
        ({"cursor": ":"}, "cursor"),
        ({"cursor": f"{MAX_ID + 1}:1"}, "cursor"),
        ({"cursor": "-1:-1"}, "cursor"),
        ({"cursor": "9" * 60}, "cursor"),
    ],
    ids=repr,
)
def test_bad_conversation_list_queries_are_400(
    query: dict[str, Any], field: str, uid: int, bff: Api
) -> None:
    assert_error(bff.call("GET", f"/users/{uid}/conversations", **query), 400, "invalid", field)


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"before": "abc"}, "before"),
        ({"before": -1}, "before"),
        ({"limit": 1000}, "limit"),
        ({"before": MAX_ID + 1}, "before"),
    ],
    ids=repr,
)
def test_bad_history_queries_are_400(
    query: dict[str, Any], field: str, pair: tuple[int, int], bff: Api
) -> None:
    alice, bob = pair
    result = bff.call("GET", f"/users/{alice}/conversations/{bob}/messages", **query)
    assert_error(result, 400, "invalid", field)


@pytest.mark.parametrize("upto", ["x", -1, 1.5, True, MAX_ID + 1])
def test_bad_upto_msgkey_is_400(upto: Any, pair: tuple[int, int], sender: Api, bff: Api) -> None:
    alice, bob = pair
    sender.sent(alice, bob)
    assert_error(bff.read(bob, alice, upto=upto), 400, "invalid", "upto_msgkey")
    assert bff.unread(bob)["total"] == 1


def test_blocking_yourself_is_400(uid: int, bff: Api) -> None:
    assert_error(bff.call("PUT", f"/users/{uid}/blocks/{uid}"), 400, "invalid", "peer_uid")


def test_unknown_msgkey_recall_is_404(sender: Api) -> None:
    assert_error(sender.recall(str(MAX_ID)), 404, "not_found")


# -- docs -----------------------------------------------------------------------------------------
def test_the_schema_documents_the_messaging_endpoints() -> None:
    response = Api(None).http.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    paths = json.loads(response.content)["paths"]
    for path in [
        "/api/v1/messages",
        "/api/v1/messages/{msgkey}/recall",
        "/api/v1/users/{uid}/conversations",
        "/api/v1/users/{uid}/conversations/{peer_uid}",
        "/api/v1/users/{uid}/conversations/{peer_uid}/messages",
        "/api/v1/users/{uid}/conversations/{peer_uid}/messages/{msgkey}",
        "/api/v1/users/{uid}/conversations/{peer_uid}/read",
        "/api/v1/users/{uid}/messages",
        "/api/v1/users/{uid}/blocks/{peer_uid}",
        "/api/v1/users/{uid}/unread",
    ]:
        assert path in paths


# -- the error handler on its own ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("exc", "status", "code"),
    [
        (RateLimited("Slow down.", retry_after_s=7), 429, "rate_limited"),
        (Conflict("Taken."), 409, "conflict"),
        (TooLarge("Too big."), 413, "too_large"),
        (RequestDataTooBig(), 413, "too_large"),
        (Http404(), 404, "not_found"),
        (PermissionDenied(), 403, "forbidden"),
    ],
    ids=lambda v: type(v).__name__ if isinstance(v, Exception) else str(v),
)
def test_exception_handler_shapes(exc: Exception, status: int, code: str) -> None:
    response = api_exception_handler(exc, {})
    assert response is not None
    assert response.status_code == status
    assert response.data["error"] == code
    assert response.data["detail"]
    if status == 429:
        assert response["Retry-After"] == "7"


def test_nested_validation_errors_are_flattened() -> None:
    detail = {"content": {"text": ["too long"]}, "items": [{"uid": ["bad"]}], "x": ["a", "b"]}
    assert flatten(detail) == {"content.text": "too long", "items.0.uid": "bad", "x": "a"}


def test_other_exceptions_stay_server_errors() -> None:
    assert api_exception_handler(RuntimeError("bug"), {}) is None


# -- write rate ------------------------------------------------------------------------------------
def test_writes_past_the_clients_rate_are_429_with_retry_after_and_store_nothing(
    pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    with override_settings(API_WRITE_RATE_PER_S=0.5, API_WRITE_BURST=2):
        assert sender.send(alice, bob, "one")[0] == 201
        assert sender.send(alice, bob, "two")[0] == 201
        response = sender.http.post(
            f"{API}/messages",
            {
                "sender_uid": alice,
                "receiver_uid": bob,
                "client_msg_id": "three",
                "content": {"type": "text", "text": "three"},
            },
            format="json",
        )
        assert response.status_code == 429, response.content
        assert response.json()["error"] == "rate_limited"
        assert 1 <= int(response["Retry-After"]) <= 2
        assert bff.unread(bob)["total"] == 2  # the refused write stored nothing
        assert bff.unread(bob)["total"] == 2  # reads are not limited
        assert inbox_api("other-client").call("PUT", f"/users/{bob}/blocks/{alice}")[0] == 204
