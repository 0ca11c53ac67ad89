"""The API clients' CLI: create prints a token that works (once), rotate replaces it, revoke cuts
the client off; bad input exits non-zero with one readable line and changes nothing."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from api.models import ApiClient
from tests.api.factories import Api

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue().strip()


def test_create_prints_a_working_token_with_the_scopes_and_senders(uid: int) -> None:
    token = run("apiclient_create", "shop", "--scopes", "send,inbox", "--senders", str(uid))
    client = ApiClient.objects.get(name="shop")
    assert token.startswith("msv_")
    assert client.token_hash != token  # only the hash is stored
    assert sorted(client.scopes) == ["inbox", "send"]
    assert list(client.senders.values_list("uid", flat=True)) == [uid]
    assert Api(token).call("GET", f"/users/{uid}/unread")[0] == 200


def test_rotate_replaces_the_token_and_revoke_cuts_the_client_off(uid: int) -> None:
    old = run("apiclient_create", "bff", "--scopes", "inbox")
    new = run("apiclient_rotate", "bff")
    assert Api(old).call("GET", f"/users/{uid}/unread")[0] == 401
    assert Api(new).call("GET", f"/users/{uid}/unread")[0] == 200
    assert run("apiclient_revoke", "bff") == "bff: revoked"
    assert Api(new).call("GET", f"/users/{uid}/unread")[0] == 401
    assert run("apiclient_revoke", "bff") == "bff: was already revoked"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["apiclient_create", "x", "--scopes", "send,admin"], "unknown scope"),
        (["apiclient_create", "x", "--scopes", ","], "unknown scope"),
        (["apiclient_create", "x", "--scopes", "send", "--senders", "0"], "sender uids"),
        (["apiclient_create", " ", "--scopes", "send"], "name must be"),
        (["apiclient_create", "x", "--scopes", "send,inbox"], "a send client needs --senders"),
        (["apiclient_create", "x", "--scopes", "campaigns"], "a campaigns client needs --senders"),
        (["apiclient_rotate", "nobody"], "no API client named 'nobody'"),
        (["apiclient_revoke", "nobody"], "no API client named 'nobody'"),
    ],
)
def test_bad_input_is_one_readable_error_and_stores_nothing(args: list[str], message: str) -> None:
    with pytest.raises(CommandError, match=message):
        run(*args)
    assert not ApiClient.objects.exists()


def test_a_second_client_of_the_same_name_is_refused() -> None:
    run("apiclient_create", "dup", "--scopes", "send", "--senders", "1")
    with pytest.raises(CommandError, match="exists already"):
        run("apiclient_create", "dup", "--scopes", "inbox")
    assert ApiClient.objects.get(name="dup").scopes == ["send"]


def test_rotating_a_revoked_client_is_refused() -> None:
    run("apiclient_create", "gone", "--scopes", "send", "--senders", "1")
    run("apiclient_revoke", "gone")
    with pytest.raises(CommandError, match="is revoked"):
        run("apiclient_rotate", "gone")
