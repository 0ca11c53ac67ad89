"""API clients: token issue and revocation (operators drive these from Django admin), and what
a client may do beyond its scopes (recall).

A token is ``msv_`` + 43 url-safe characters (256 random bits). Only its sha256 is stored
(``ApiClient.token_hash``), with the first 8 characters (``token_prefix``) kept for display, so
the plain token exists once: in the answer to the create or rotate that issued it.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from typing import TYPE_CHECKING

from django.db import transaction
from django.utils import timezone

from messaging.errors import Forbidden, NotFound
from messaging.models import ApiClient, ApiClientSender, Message, Scope
from messaging.services import message_recall

if TYPE_CHECKING:
    from messaging.auth import ApiPrincipal

TOKEN_PREFIX = "msv_"
PREFIX_CHARS = 8


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
    return token


def api_clients_revoke(*, client_ids: Iterable[int]) -> int:
    """Deactivate clients for good; returns how many were active."""
    return ApiClient.objects.filter(pk__in=list(client_ids), is_active=True).update(
        is_active=False, revoked_at=timezone.now()
    )


def message_recall_for_client(*, principal: ApiPrincipal, msgkey: int) -> Message:
    """An operator client recalls anything; a ``send`` client its own senders' messages, in time.

    Another client's messages answer 404, like messages that do not exist.
    """
    if principal.is_operator:
        return message_recall(msgkey=msgkey, actor_uid=None, operator=True)
    if Scope.SEND not in principal.scopes:
        raise Forbidden("Recall needs the 'send' scope or an operator client.")
    sender = Message.objects.filter(msgkey=msgkey).values_list("sender_uid", flat=True).first()
    if sender is None or not principal.owns_sender(sender):
        raise NotFound("No such message.")
    return message_recall(msgkey=msgkey, actor_uid=sender)
