"""The unread fast path (unread/fastpath.py) through the ASGI callable, on real Redis and MariaDB.

A client must not be able to tell it from the DRF view except by speed: every answer here is
compared, status, headers and body bytes, with what Django's own ASGI handler answers to the same
request. ``Stack`` counts the requests the fast path handed to Django, so a test can tell which
side answered. Requests run from the test's thread (``async_to_sync``): Django's sync code then
runs on this thread too, inside the test's transaction.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.asgi import get_asgi_application
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from rest_framework.throttling import AnonRateThrottle

from api.clients import api_client_rotate_token, api_clients_revoke
from api.models import Scope
from infra import broker as broker_redis
from infra.redis import get_redis
from infra.redis_mux import MuxRedis
from messaging import services
from storage.convcache import keys as convcache_keys
from storage.convcache import prewarm
from storage.counters import epoch, keys
from storage.counters.store import unread_incr_many
from tests.api.factories import ClientApi, inbox_api, make_api
from tests.messaging.test_convcache import seed
from unread import announcements
from unread.apis import UnreadApi
from unread.fastpath import UnreadFastPath, unsupported_settings

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]
Headers = Sequence[tuple[bytes, bytes]]
MAX_ID = (1 << 63) - 1


@dataclass(frozen=True)
class Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Stack:
    """The fast path in front of Django's ASGI handler, counting what it hands on."""

    def __init__(self, redis: MuxRedis | None = None) -> None:
        self.django = get_asgi_application()
        self.handed_on = 0
        self.app = UnreadFastPath(self._django, redis=redis)

    async def _django(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        self.handed_on += 1
        await self.django(scope, receive, send)

    def get(self, path: str, headers: Headers = (), query: bytes = b"") -> Answer:
        return request(self.app, path, headers, query=query)

    def django_get(self, path: str, headers: Headers = (), query: bytes = b"") -> Answer:
        return request(self.django, path, headers, query=query)

    def fast(self, path: str, headers: Headers) -> Answer:
        """A request the fast path must answer by itself."""
        before = self.handed_on
        answer = self.get(path, headers)
        assert self.handed_on == before, "handed to Django"
        return answer


def request(app: Any, path: str, headers: Headers, *, query: bytes = b"") -> Answer:
    return async_to_sync(_request)(app, path, headers, query)


async def _request(app: Any, path: str, headers: Headers, query: bytes) -> Answer:
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "root_path": "",
        # a fixed X-Request-ID unless the test gives one: answers then compare byte for byte
        "headers": [(b"host", b"testserver"), *_request_id(headers), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("testserver", 80),
    }
    sent: list[Mapping[str, Any]] = []
    asked = asyncio.Event()

    async def receive() -> dict[str, Any]:
        if asked.is_set():  # the client stays connected until the answer is out
            await asyncio.Event().wait()
        asked.set()
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(message)

    try:
        await app(scope, receive, send)
    finally:
        if isinstance(app, UnreadFastPath):  # each call runs its own event loop
            await app.redis.aclose()
    body = b"".join(m.get("body", b"") for m in sent[1:])
    return Answer(sent[0]["status"], list(sent[0]["headers"]), body)


def _request_id(headers: Headers) -> list[tuple[bytes, bytes]]:
    given = any(name == b"x-request-id" for name, _ in headers)
    return [] if given else [(b"x-request-id", b"fastpath-test")]


def bearer(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


def unread_path(uid: int | str) -> str:
    return f"/api/v1/users/{uid}/unread"


@pytest.fixture(autouse=True)
def keep_the_test_transaction() -> Iterator[None]:
    """As Django's test clients do: a request must not close the connection the test's
    transaction lives on (Django's handler closes connections it finds in a transaction)."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def stack() -> Stack:
    return Stack()


@pytest.fixture
def bff() -> ClientApi:
    return inbox_api("bff-fastpath")


def give_unread(owner: int, counts: Mapping[str, int]) -> None:
    for peer, (category, n) in enumerate(counts.items(), start=1):
        unread_incr_many(owner_uids=[owner], peer_uid=peer, category=category, marker=None, delta=n)


# -- same answers -----------------------------------------------------------------------------
def test_a_warm_request_gets_the_views_exact_answer_with_no_sql(
    stack: Stack, bff: ClientApi, uid: int, django_assert_num_queries: Any
) -> None:
    give_unread(uid, {"followed": 2, "stranger": 3, "business": 1, "system": 4})
    announcements.announcement_publish(content="hello, everyone")
    path, auth = unread_path(uid), bearer(bff.token)
    cold = stack.get(path, auth)  # nothing cached yet: Django answers, and warms the caches
    assert stack.handed_on == 1
    with django_assert_num_queries(0):
        warm = stack.fast(path, auth)
    assert warm == cold == stack.django_get(path, auth)
    assert warm.json == {
        "total": 10,
        "by_category": {"followed": 2, "stranger": 3, "business": 1, "system": 4, "group": 0},
        "announcements": 1,
        "mentions": 0,
    }
    assert warm.json == bff.unread(uid)  # and what DRF's test client sees


def test_the_fast_path_returns_the_request_id_as_django_does(
    stack: Stack, bff: ClientApi, uid: int
) -> None:
    path, auth = unread_path(uid), bearer(bff.token)
    stack.get(path, auth)
    given = stack.fast(path, [*auth, (b"x-request-id", b"lb-7f3a")])
    assert (b"X-Request-ID", b"lb-7f3a") in given.headers
    made = stack.fast(path, [*auth, (b"x-request-id", b"not a valid id")])
    assert dict(made.headers)[b"X-Request-ID"] != b"not a valid id"
    assert len(dict(made.headers)[b"X-Request-ID"]) == 32  # a fresh uuid4, as Django makes
    assert given.headers[-1][0] == stack.django_get(path, auth).headers[-1][0] == b"X-Request-ID"


def test_a_user_with_nothing_unread_and_the_largest_uid(stack: Stack, bff: ClientApi) -> None:
    auth = bearer(bff.token)
    stack.get(unread_path(1), auth)
    for uid in (1, MAX_ID, "0000000000000000042"):  # leading zeros: DRF's id field takes them
        answer = stack.fast(unread_path(uid), auth)
        assert answer == stack.django_get(unread_path(uid), auth)
        assert answer.json["total"] == 0


def test_a_user_can_add_a_query_string_but_not_override_the_format(
    stack: Stack, bff: ClientApi, uid: int
) -> None:
    auth = bearer(bff.token)
    stack.get(unread_path(uid), auth)
    before = stack.handed_on
    assert stack.get(unread_path(uid), auth, query=b"_=1700000000") == stack.fast(
        unread_path(uid), auth
    )
    assert stack.handed_on == before
    for query in (b"format=json", b"format=api", b"%66ormat=api"):
        assert stack.get(unread_path(uid), auth, query) == stack.django_get(
            unread_path(uid), auth, query
        )


# -- errors: Django answers them, in the API's error shape ---------------------------------------
def test_missing_bad_and_unscoped_tokens_answer_401_and_403(stack: Stack, uid: int) -> None:
    sender = make_api("send-only", [Scope.SEND], [uid])
    cases = {
        "no header": ([], 401, "unauthorized"),
        "unknown token": (bearer("msv_nope"), 401, "unauthorized"),
        "not bearer": ([(b"authorization", b"Token abc")], 401, "unauthorized"),
        "three words": ([(b"authorization", b"Bearer a b")], 401, "unauthorized"),
        "no inbox scope": (bearer(sender.token), 403, "forbidden"),
    }
    for what, (headers, status, code) in cases.items():
        for _ in range(2):  # the second time, whatever could be cached is
            answer = stack.get(unread_path(uid), headers)
            assert answer == stack.django_get(unread_path(uid), headers), what
            assert answer.status == status, what
            assert set(answer.json) == {"error", "detail"}, what
            assert answer.json["error"] == code, what
    assert stack.get(unread_path(uid), []).headers.count(
        (b"WWW-Authenticate", b'Bearer realm="missive"')
    )


@pytest.mark.parametrize("bad", ["abc", "-1", "0", "1.5", str(MAX_ID + 1), "1" * 20, "٣"])
def test_a_bad_uid_answers_400_naming_it(stack: Stack, bff: ClientApi, bad: str) -> None:
    auth = bearer(bff.token)
    stack.get(unread_path(1), auth)  # the principal is cached: still, no fast answer
    answer = stack.get(unread_path(bad), auth)
    assert answer == stack.django_get(unread_path(bad), auth)
    assert answer.status == 400
    assert answer.json["error"] == "invalid"
    assert set(answer.json["fields"]) == {"uid"}


def test_odd_requests_get_djangos_own_answers(stack: Stack, bff: ClientApi, uid: int) -> None:
    auth = bearer(bff.token)
    stack.get(unread_path(uid), auth)
    odd: list[Headers] = [
        [*auth, (b"accept", b"application/json; indent=2")],  # DRF indents
        [*auth, (b"accept", b"text/html")],  # DRF refuses: 406
        [*auth, *auth],  # Django joins repeated headers
        [*auth, (b"host", b"evil.example")],  # ALLOWED_HOSTS: 400
        [*auth, (b"content-length", b"70000")],  # over the body limit: 413
    ]
    statuses = []
    for headers in odd:
        answer = stack.get(unread_path(uid), headers)
        assert answer == stack.django_get(unread_path(uid), headers)
        statuses.append(answer.status)
    assert statuses == [200, 406, 401, 400, 413]


# -- revocation -------------------------------------------------------------------------------
def test_a_revoked_client_is_refused_on_the_next_request(
    stack: Stack, bff: ClientApi, uid: int
) -> None:
    auth = bearer(bff.token)
    stack.get(unread_path(uid), auth)
    assert stack.fast(unread_path(uid), auth).status == 200
    api_clients_revoke(client_ids=[bff.client.pk])
    answer = stack.get(unread_path(uid), auth)
    assert (answer.status, answer.json["error"]) == (401, "unauthorized")


def test_a_rotated_token_stops_working_and_the_new_one_works(
    stack: Stack, bff: ClientApi, uid: int
) -> None:
    stack.get(unread_path(uid), bearer(bff.token))
    assert stack.fast(unread_path(uid), bearer(bff.token)).status == 200
    new = api_client_rotate_token(bff.client)
    assert stack.get(unread_path(uid), bearer(bff.token)).status == 401
    assert stack.get(unread_path(uid), bearer(new)).status == 200
    assert stack.fast(unread_path(uid), bearer(new)).status == 200


# -- announcements ----------------------------------------------------------------------------
def test_announcements_are_counted_and_a_new_one_shows_on_the_next_request(
    stack: Stack, bff: ClientApi, uids: Uids
) -> None:
    reader, other = uids(2)
    auth = bearer(bff.token)
    for n in range(3):
        announcements.announcement_publish(content=f"news {n}")
    announcements.announcements_mark_read(uid=reader)
    stack.get(unread_path(reader), auth)
    assert stack.fast(unread_path(reader), auth).json["announcements"] == 0
    assert stack.fast(unread_path(other), auth).json["announcements"] == 3
    announcements.announcement_publish(content="one more")  # moves the version: Django reloads
    assert stack.get(unread_path(reader), auth).json["announcements"] == 1
    assert stack.fast(unread_path(other), auth).json["announcements"] == 4
    marks = list(get_redis().scan_iter(match="ann:mark:*"))  # SCAN: every node of a cluster
    assert marks == [announcements.mark_key(reader).encode()]


# -- big UPs ----------------------------------------------------------------------------------
def test_a_big_ups_request_enqueues_one_prewarm_per_window(
    stack: Stack, bff: ClientApi, uids: Uids, settings: Any
) -> None:
    settings.BIG_UP_THRESHOLD = 20
    big, small = uids(2)
    seed(big, uids(21))
    seed(small, uids(3))
    assert prewarm.compute_big_ups() == 1
    broker = broker_redis.client()
    broker.delete("messaging")
    auth = bearer(bff.token)
    stack.get(unread_path(small), auth)  # warms the principal
    for _ in range(3):
        assert stack.fast(unread_path(big), auth).status == 200
        assert stack.fast(unread_path(small), auth).status == 200
    assert broker.llen("messaging") == 1
    assert get_redis().ttl(convcache_keys.prewarm_marker(big)) > 0
    assert not get_redis().exists(convcache_keys.prewarm_marker(small))
    broker.delete("messaging")


# -- stepping aside ---------------------------------------------------------------------------
def test_with_redis_unreachable_django_answers(bff: ClientApi, uid: int) -> None:
    give_unread(uid, {"stranger": 2})
    stack = Stack(redis=MuxRedis("redis://127.0.0.1:1/0", timeout_s=0.5))  # nothing listens
    auth = bearer(bff.token)
    for _ in range(2):
        answer = stack.get(unread_path(uid), auth)
        assert (answer.status, answer.json["total"]) == (200, 2)
    assert stack.handed_on == 2


def test_lifespan_startup_loads_the_announcement_copy_and_shutdown_completes(
    stack: Stack,
) -> None:
    announcements.announcement_publish(content="before the server starts")
    version = get_redis().get(announcements.VERSION)
    assert isinstance(version, bytes)
    assert announcements.unread_from_copy(None, version) is None  # this process has no copy yet
    assert async_to_sync(_lifespan)(stack.app) == [
        "lifespan.startup.complete",
        "lifespan.shutdown.complete",
    ]
    assert announcements.unread_from_copy(None, version) == 1


async def _lifespan(app: UnreadFastPath) -> list[str]:
    events = iter([{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}])
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return next(events)

    async def send(message: Mapping[str, Any]) -> None:
        sent.append(message["type"])

    await app({"type": "lifespan", "asgi": {"version": "3.0"}}, receive, send)
    return sent


def test_the_project_settings_keep_the_fast_path_on() -> None:
    from config.asgi import application

    assert isinstance(application, UnreadFastPath)
    assert unsupported_settings() == []
    assert application.enabled


def test_a_tls_proxys_header_alone_keeps_it_on(settings: Any) -> None:
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert unsupported_settings() == []
    settings.SECURE_SSL_REDIRECT = True  # then is_secure() decides a redirect: Django answers
    assert unsupported_settings() == ["SECURE_SSL_REDIRECT", "SECURE_PROXY_SSL_HEADER"]


def test_settings_or_a_view_policy_it_does_not_reproduce_turn_it_off(
    settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.MIDDLEWARE = [*settings.MIDDLEWARE, "django.middleware.gzip.GZipMiddleware"]
    settings.SECURE_HSTS_SECONDS = 3600
    monkeypatch.setattr(UnreadApi, "throttle_classes", [AnonRateThrottle])
    assert unsupported_settings() == [
        "SECURE_HSTS_SECONDS",
        "MIDDLEWARE",
        "UnreadApi.throttle_classes",
    ]
    assert not Stack().app.enabled


def test_its_headers_follow_the_middleware_order(settings: Any, bff: ClientApi, uid: int) -> None:
    frames = "django.middleware.clickjacking.XFrameOptionsMiddleware"
    settings.MIDDLEWARE = [frames, *(m for m in settings.MIDDLEWARE if m != frames)]
    stack, path, auth = Stack(), unread_path(uid), bearer(bff.token)
    stack.get(path, auth)
    answer = stack.fast(path, auth)
    assert answer == stack.django_get(path, auth)
    assert answer.headers[-1][0] == b"X-Frame-Options"  # now the outermost


def test_without_the_middleware_whose_effect_it_reproduces_it_is_off(settings: Any) -> None:
    common = "django.middleware.common.CommonMiddleware"
    settings.MIDDLEWARE = [m for m in settings.MIDDLEWARE if m != common]
    assert unsupported_settings() == ["MIDDLEWARE"]


def test_after_a_redis_restart_an_unrepaired_user_goes_to_django(uids: Uids) -> None:
    alice, bob = uids(2)
    content = {"type": "text", "text": "x"}
    services.message_send(sender_uid=alice, receiver_uid=bob, content=content, client_msg_id="x")
    bff, stack = inbox_api("bff-epoch"), Stack()
    path, auth = unread_path(bob), bearer(bff.token)
    epoch.check_restart()
    get_redis().delete(keys.unread(bob))
    get_redis().set(keys.RUN_ID, "a-previous-run")
    epoch.check_restart()
    assert stack.get(path, auth).json["total"] == 1
    assert stack.handed_on == 1  # Django repaired the counters first
    assert stack.fast(path, auth).json["total"] == 1  # verified now: answered on the loop
