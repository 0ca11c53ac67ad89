"""Schema fuzzing: Schemathesis generates requests from the live OpenAPI schema (``/api/schema/``)
and sends them through the real Django stack, as each kind of client, on the real services.

Every check Schemathesis has runs (the CLI's ``--checks all``): no 500; a documented status,
content type, headers and body; a schema-valid request is never refused with 400 and a
schema-violating one never accepted; auth and methods enforced. Examples are bounded
(``MAX_EXAMPLES`` per operation, each sent as every client) and derandomized, so a run takes a
bounded time and a failure reproduces.

Business rules a schema cannot express are stated in their operation's description and excused
here by name (``BUSINESS_RULES``): only that rule's own 400, nothing else.
"""

from __future__ import annotations

import os
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

# 12 per operation, each sent as all 5 clients: 33 operations in under a minute on 2 cores, which
# `make test` can afford; FUZZ_EXAMPLES=40 (the figure) for a deeper run by hand.
MAX_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "12"))
SENDERS = [1, 2, 3, 4242]  # uids the generator may hit; most it generates are nobody's
CLIENTS = {
    "send": [Scope.SEND],
    "campaigns": [Scope.CAMPAIGNS],
    "inbox": [Scope.INBOX],
    "announce": [Scope.ANNOUNCE],
    "users": [Scope.USERS],
}
CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.negative_data_rejection,
    checks.positive_data_acceptance,
    checks.missing_required_header,
    checks.unsupported_method,
    checks.allow_header_conformance,
    checks.use_after_free,
    checks.ensure_resource_availability,
    checks.ignored_auth,
    checks.object_level_authorization,
]

# operation id -> the 400s its description names as business rules (cross-field or content rules
# OpenAPI 3.0 cannot state), each as (the field it names, the openings of its detail).
BUSINESS_RULES: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "message_send": [("receiver_uid", ("A user cannot message themselves",))],
    "block_set": [("peer_uid", ("A user cannot block themselves",))],
    "block_unset": [("peer_uid", ("A user cannot block themselves",))],
    "campaign_create": [
        # at least one valid uid: entries that are not uids are counted, not refused
        ("audience.uids", ("audience.uids holds no valid uid",)),
        ("audience.followed_before", ("Invalid input: audience.followed_before: must be after",)),
    ],
    "audience_upload": [("file", ("No valid uid in the upload", "The upload is empty"))],
}

app = get_wsgi_application()
schema = schemathesis.openapi.from_wsgi("/api/schema/", app)
# A list over its maxItems (audience.exclude_uids, audience.uids) is refused as 413, not 400:
# a rejection all the same.
_rejection = schema.config.checks.negative_data_rejection
_rejection.expected_statuses = [*_rejection.expected_statuses, "413"]


@pytest.fixture(autouse=True)
def keep_the_test_transaction() -> Iterator[None]:
    """The WSGI handler must not close the connection the test's transaction lives on."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)
    current_app.control.purge()  # campaigns the fuzzer launched leave tasks nobody should run


@pytest.fixture
def tokens(db: Any) -> dict[str, str]:
    """A token for each kind of client, by its name."""
    return {
        name: api_client_create(name=f"fuzz-{name}", scopes=scopes, sender_uids=SENDERS)[1]
        for name, scopes in sorted(CLIENTS.items())
    }


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_documented_and_never_a_500(case: Any, tokens: dict[str, str]) -> None:
    """Each generated request is sent as every kind of client in turn. Generating a request costs
    about what sending it five times does, so it is generated once: the same 12 x 5 requests per
    operation took 127 s as 165 tests (one per operation and client) and take 75 s as 33."""
    for name, token in tokens.items():
        try:
            _send_and_check(case, token)
        except BaseException as exc:
            exc.add_note(f"sent as the {name!r} client")
            raise


def _send_and_check(case: Any, token: str) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    response = case.call(headers=headers)
    excused = [checks.positive_data_acceptance] if _business_rule(case, response) else []
    if _undocumented_query(case):
        # The API ignores query parameters it does not know (the schema's description says
        # so), as HTTP APIs do for cache-busters: such a request is not refused.
        excused.append(checks.negative_data_rejection)
    case.validate_response(response, checks=CHECKS, excluded_checks=excused, headers=headers)


def _undocumented_query(case: Any) -> bool:
    params = case.operation.definition.raw.get("parameters", [])
    documented = {p["name"] for p in params if p.get("in") == "query"}
    return bool(set(case.query or {}) - documented)


def _business_rule(case: Any, response: Any) -> bool:
    """True for the 400 of a rule named in BUSINESS_RULES (and its operation's description)."""
    rules = BUSINESS_RULES.get(case.operation.definition.raw.get("operationId"), [])
    if not rules or response.status_code != 400:
        return False
    body = response.json()
    fields, detail = body.get("fields", {}), str(body["detail"])
    return any(field in fields and detail.startswith(openings) for field, openings in rules)
