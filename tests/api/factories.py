"""Factories for the messaging API tests: API clients with tokens, and a small HTTP helper.

``Api`` speaks to the real Django stack through DRF's test client with a bearer token and
returns ``(status, json)``; ids go in as ints (or strings) and come back as strings.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlencode

from rest_framework.test import APIClient

from api.clients import api_client_create
from api.models import ApiClient, Scope

API = "/api/v1"
_cmids = itertools.count(1)


class Api:
    def __init__(self, token: str | None) -> None:
        self.http = APIClient()
        if token is not None:
            self.http.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")

    def call(self, method: str, path: str, body: Any = None, **query: Any) -> tuple[int, Any]:
        raw = None if body is None else json.dumps(body)
        return self.raw(method, path, raw, query=query)

    def raw(
        self,
        method: str,
        path: str,
        data: str | bytes | None,
        *,
        content_type: str = "application/json",
        query: dict[str, Any] | None = None,
    ) -> tuple[int, Any]:
        response = self.http.generic(
            method,
            API + path,
            data or "",  # type: ignore[arg-type]  # bytes pass through untouched
            content_type=content_type,
            QUERY_STRING=urlencode(query or {}),
        )
        body = json.loads(response.content) if response.content else None
        return response.status_code, body

    # -- the endpoints, by name --------------------------------------------------------------
    def send(
        self, sender: int, receiver: int, text: str = "hi", cmid: str | None = None, **extra: Any
    ) -> tuple[int, Any]:
        body = {
            "sender_uid": sender,
            "receiver_uid": receiver,
            "content": {"type": "text", "text": text},
            "client_msg_id": cmid or f"cmid-{next(_cmids)}",
            **extra,
        }
        return self.call("POST", "/messages", body)

    def sent(self, sender: int, receiver: int, text: str = "hi") -> str:
        status, body = self.send(sender, receiver, text)
        assert status == 201, body
        return str(body["msgkey"])

    def conversations(self, uid: int, **query: Any) -> Any:
        status, body = self.call("GET", f"/users/{uid}/conversations", **query)
        assert status == 200, body
        return body

    def history(self, uid: int, peer: int, **query: Any) -> Any:
        status, body = self.call("GET", f"/users/{uid}/conversations/{peer}/messages", **query)
        assert status == 200, body
        return body

    def unread(self, uid: int) -> Any:
        status, body = self.call("GET", f"/users/{uid}/unread")
        assert status == 200, body
        return body

    def read(self, uid: int, peer: int, upto: str | None = None) -> tuple[int, Any]:
        body = {} if upto is None else {"upto_msgkey": upto}
        return self.call("POST", f"/users/{uid}/conversations/{peer}/read", body)

    def recall(self, msgkey: str | int) -> tuple[int, Any]:
        return self.call("POST", f"/messages/{msgkey}/recall")


class ClientApi(Api):
    """An ``Api`` speaking as a client created for the test."""

    def __init__(self, token: str, client: ApiClient) -> None:
        super().__init__(token)
        self.token = token
        self.client = client


def make_api(
    name: str, scopes: Iterable[str], senders: Iterable[int] = (), *, is_operator: bool = False
) -> ClientApi:
    client, token = api_client_create(
        name=name, scopes=scopes, sender_uids=senders, is_operator=is_operator
    )
    return ClientApi(token, client)


def inbox_api(name: str = "bff") -> ClientApi:
    return make_api(name, [Scope.INBOX])


def send_api(name: str, senders: Iterable[int]) -> ClientApi:
    return make_api(name, [Scope.SEND], senders)
