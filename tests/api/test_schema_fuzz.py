"""Schema fuzzing: Schemathesis generates requests from the live OpenAPI schema (``/api/schema/``)
and sends them through the real Django stack, as each kind of client, on the real services.

Every answer must be no 500, a status the operation documents, and a body and content type that
match the documented schema. Examples are bounded (``MAX_EXAMPLES`` per operation per client)
and derandomized, so a run takes a bounded time and a failure reproduces.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from celery import current_app
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis import checks

from api.clients import api_client_create
from api.models import Scope

MAX_EXAMPLES = 12
SENDERS = [1, 2, 3, 4242]  # uids the generator may hit; most it generates are nobody's
CLIENTS = {
    "send": [Scope.SEND],
    "campaigns": [Scope.CAMPAIGNS],
    "inbox": [Scope.INBOX],
    "announce": [Scope.ANNOUNCE],
}
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]

app = get_wsgi_application()
schema = schemathesis.openapi.from_wsgi("/api/schema/", app)


@pytest.fixture(autouse=True)
def keep_the_test_transaction() -> Iterator[None]:
    """The WSGI handler must not close the connection the test's transaction lives on."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)
    current_app.control.purge()  # campaigns the fuzzer launched leave tasks nobody should run


@pytest.fixture(params=sorted(CLIENTS))
def token(request: pytest.FixtureRequest, db: Any) -> str:
    _, plain = api_client_create(
        name=f"fuzz-{request.param}", scopes=CLIENTS[request.param], sender_uids=SENDERS
    )
    return plain


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_documented_and_never_a_500(case: Any, token: str) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=CHECKS)
