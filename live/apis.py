"""Live delivery's HTTP API (docs/live.md): connection tokens and presence, scope ``users`` or
``inbox`` (the consumer front end's backend, acting for its users).

- ``POST /users/{uid}/live-tokens`` ``{device_id}`` -> 201 ``{token, expires_at, url}``: the
  backend hands the URL to the user's device, which opens ``/live/v1`` with it within 60 s.
- ``GET /users/{uid}/presence`` -> ``{online, devices: [{device_id, connected_at}]}``.
"""

from __future__ import annotations

from urllib.parse import urlencode

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.auth import require_any_scope
from api.fields import path_ids
from api.models import Scope
from api.views import ERRORS, ApiView, validated
from live import selectors, services
from live.serializers import LiveTokenIn, LiveTokenOut, PresenceOut

LIVE_PATH = "/live/v1"


class LiveApi(ApiView):
    """Scope ``users`` or ``inbox``."""

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        require_any_scope(request, Scope.USERS, Scope.INBOX)


def socket_url(request: Request, token: str) -> str:
    """``ws://`` (``wss://`` behind TLS) on the host the request came to."""
    scheme = "wss" if request.is_secure() else "ws"
    return f"{scheme}://{request.get_host()}{LIVE_PATH}?{urlencode({'token': token})}"


class LiveTokenApi(LiveApi):
    """Mint a connection token for one of the user's devices."""

    @extend_schema(
        operation_id="live_token_create",
        tags=["Live delivery"],
        summary="Mint a live connection token for a device",
        request=LiveTokenIn,
        responses={201: LiveTokenOut, **ERRORS},
    )
    def post(self, request: Request, uid: str) -> Response:
        owner = path_ids(uid=uid)["uid"]
        device_id = validated(LiveTokenIn, request.data)["device_id"]
        minted = services.token_mint(uid=owner, device_id=device_id)
        body = {"token": minted.token, "expires_at": minted.expires_at}
        return Response(LiveTokenOut({**body, "url": socket_url(request, minted.token)}).data, 201)


class PresenceApi(LiveApi):
    """Which of the user's devices are connected now, on any gateway."""

    @extend_schema(
        operation_id="presence_get",
        tags=["Live delivery"],
        summary="A user's connected devices",
        responses={200: PresenceOut, **ERRORS},
    )
    def get(self, request: Request, uid: str) -> Response:
        owner = path_ids(uid=uid)["uid"]
        return Response(PresenceOut(selectors.presence(owner)).data)
