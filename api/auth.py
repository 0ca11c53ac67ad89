"""API authentication and authorisation: bearer tokens, scopes, sender ownership.

``Authorization: Bearer <token>``; the token's sha256 names an active ``ApiClient`` (unknown,
inactive or revoked → 401). The authenticated principal (``request.auth``) carries the client's
scopes; sender ownership is looked up when an endpoint needs it.

Principals are cached per process by token hash, tagged with the clients' generation
(``api.clients.api_clients_generation``, one Redis GET per request): a revoke, a token
rotation or an admin edit bumps it and takes effect on the next request everywhere. This replaces
a MySQL query per request, which dominated the cost of the hot read endpoints (BENCHMARKS.md).

``require_scope`` answers 403 without the scope (``require_any_scope``: without any of several);
``require_sender`` answers 404 for a uid that is
not one of the client's senders: a client never sees what another client's senders own, so those
ids look exactly like ids that do not exist. A ``users`` client acts as any user where an
endpoint allows it (``acts_for_users``). ``api.views.ApiView`` applies the scope.

DRF imports this module while it loads its own settings, so it must not import
``rest_framework.views`` (nor anything that does).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, ClassVar

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from api.clients import api_clients_generation, token_hash
from api.errors import Forbidden, NotFound
from api.models import ApiClient, ApiClientSender

MAX_TOKEN_CHARS = 256
CACHE_TTL_S = 300  # a safety net only: changes made through api.clients apply at once
CACHE_MAX = 10_000


@dataclass(frozen=True)
class ApiPrincipal:
    client_id: int
    name: str
    scopes: frozenset[str]
    is_operator: bool
    is_authenticated: ClassVar[bool] = True  # read by code written for Django users

    def __str__(self) -> str:
        return self.name

    @property
    def acts_for_users(self) -> bool:
        """A ``users`` client (the consumer backend) acts as any user, with no sender list."""
        return "users" in self.scopes

    def owns_sender(self, uid: int) -> bool:
        """One indexed lookup; only sending endpoints need it, so it is not loaded up front."""
        return ApiClientSender.objects.filter(client_id=self.client_id, uid=uid).exists()


# token hash → (generation, expiry on the monotonic clock, principal); active clients only
_cache: dict[str, tuple[str, float, ApiPrincipal]] = {}


def principal_for(token: str) -> ApiPrincipal | None:
    digest = token_hash(token)
    generation = api_clients_generation()  # read before the row: a later change retires it
    hit = _cache.get(digest)
    if hit is not None and hit[0] == generation and hit[1] > time.monotonic():
        return hit[2]
    found = _load(digest)
    if found is not None and generation is not None:
        if len(_cache) >= CACHE_MAX:
            _cache.clear()
        _cache[digest] = (generation, time.monotonic() + CACHE_TTL_S, found)
    return found


def cached_principal(token: str) -> tuple[str, ApiPrincipal] | None:
    """The principal cached here for ``token`` and the generation it was cached under, with no I/O;
    None when nothing unexpired is cached. The caller must compare that generation with the current
    one (the unread fast path reads it in its own pipelined round trip) before trusting it."""
    hit = _cache.get(token_hash(token))
    if hit is None or hit[1] <= time.monotonic():
        return None
    return hit[0], hit[2]


def _load(digest: str) -> ApiPrincipal | None:
    row = (
        ApiClient.objects.filter(token_hash=digest, is_active=True, revoked_at__isnull=True)
        .values_list("pk", "name", "scopes", "is_operator")
        .first()
    )
    if row is None:
        return None
    pk, name, scopes, is_operator = row
    return ApiPrincipal(pk, name, frozenset(scopes or ()), is_operator)


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Request) -> tuple[ApiPrincipal, ApiPrincipal] | None:
        header = get_authorization_header(request).split()
        if not header:
            return None
        if header[0].lower() != b"bearer" or len(header) != 2:
            raise AuthenticationFailed("Use 'Authorization: Bearer <token>'.")
        token = header[1].decode("latin-1")
        found = principal_for(token) if len(token) <= MAX_TOKEN_CHARS else None
        if found is None:
            raise AuthenticationFailed("Unknown, inactive or revoked token.")
        return found, found

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="missive"'


class IsApiClient(BasePermission):
    def has_permission(self, request: Request, view: Any) -> bool:
        return isinstance(request.auth, ApiPrincipal)


def principal(request: Request) -> ApiPrincipal:
    found = request.auth
    if not isinstance(found, ApiPrincipal):  # IsApiClient has already refused such requests
        raise AuthenticationFailed("Authentication required.")
    return found


def require_scope(request: Request, scope: str) -> ApiPrincipal:
    found = principal(request)
    if scope not in found.scopes:
        raise Forbidden(f"This client lacks the '{scope}' scope.")
    return found


def require_any_scope(request: Request, *scopes: str) -> ApiPrincipal:
    """403 unless the client has at least one of ``scopes``."""
    found = principal(request)
    if not found.scopes.intersection(scopes):
        names = " or ".join(f"'{s}'" for s in scopes)
        raise Forbidden(f"This client lacks the {names} scope.")
    return found


def require_sender(request: Request, uid: int, field: str = "sender_uid") -> ApiPrincipal:
    """404 unless ``uid`` is one of the client's senders (others' senders look nonexistent)."""
    found = principal(request)
    if not found.owns_sender(uid):
        raise NotFound(f"No sender {uid} for this client.", {field: "not a sender of this client"})
    return found
