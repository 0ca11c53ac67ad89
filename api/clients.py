"""API clients: token issue, rotation and revocation (operators drive these from Django admin).

A token is ``msv_`` + 43 url-safe characters (256 random bits). Only its sha256 is stored
(``ApiClient.token_hash``), with the first 8 characters (``token_prefix``) kept for display, so
the plain token exists once: in the answer to the create or rotate that issued it.

Redis ``apiclients:gen`` (a random token) versions every client: any change to a client (revoke,
rotate, an admin edit) bumps it, and processes drop the principals they cached
(``api.auth``). Code that changes ``ApiClient`` rows directly must call
``api_clients_changed()``.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable

from django.db import transaction
from django.utils import timezone
from redis.exceptions import RedisError

from api.models import ApiClient, ApiClientSender, Scope
from infra.redis import get_redis

TOKEN_PREFIX = "msv_"
PREFIX_CHARS = 8
GENERATION_KEY = "apiclients:gen"


def api_clients_generation() -> str | None:
    """The current version of all clients; None when Redis does not answer (then: no cache).

    A random token, not a counter: a Redis that lost the key (restart, flush) hands out a new
    one, never a value some process cached its principals under before.
    """
    try:
        client = get_redis()
        value = client.get(GENERATION_KEY)
        if value is None:
            client.set(GENERATION_KEY, secrets.token_hex(8), nx=True)
            value = client.get(GENERATION_KEY)
    except RedisError:
        return None
    return value.decode() if isinstance(value, bytes) else None


def api_clients_changed() -> None:
    """Invalidate cached principals now, and again once the change commits: a reader that
    loaded the old row in between cached it under the first version, which the second retires."""
    _bump_generation()
    transaction.on_commit(_bump_generation)


def _bump_generation() -> None:
    get_redis().set(GENERATION_KEY, secrets.token_hex(8))


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def api_client_issue_token(client: ApiClient) -> str:
    """Give ``client`` a fresh token (unsaved); the old one stops working once saved."""
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    client.token_hash = token_hash(token)
    client.token_prefix = token[:PREFIX_CHARS]
    return token


def api_client_create(
    *, name: str, scopes: Iterable[str], sender_uids: Iterable[int] = (), is_operator: bool = False
) -> tuple[ApiClient, str]:
    """Create a client; returns it with its plain token (shown once, never stored)."""
    client = ApiClient(
        name=name, scopes=sorted({Scope(s).value for s in scopes}), is_operator=is_operator
    )
    token = api_client_issue_token(client)
    with transaction.atomic():
        client.save()
        ApiClientSender.objects.bulk_create(
            [ApiClientSender(client=client, uid=uid) for uid in set(sender_uids)]
        )
    return client, token


def api_client_rotate_token(client: ApiClient) -> str:
    token = api_client_issue_token(client)
    client.save(update_fields=["token_hash", "token_prefix"])
    api_clients_changed()
    return token


def api_clients_revoke(*, client_ids: Iterable[int]) -> int:
    """Deactivate clients for good; returns how many were active."""
    count = ApiClient.objects.filter(pk__in=list(client_ids), is_active=True).update(
        is_active=False, revoked_at=timezone.now()
    )
    api_clients_changed()
    return count
