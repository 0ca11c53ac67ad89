"""Messaging HTTP API (API.md, "1:1 messages and conversations"): thin views over services.

Each view validates its path ids, query and body with an input serializer, calls one service or
selector, and renders an output serializer. Authorisation: ``POST /messages`` needs ``send`` and
acts as one of the client's senders, or ``users`` and acts as any user; recall is for the
sender's client (in the window) or an operator client; every ``/users/{uid}/...`` endpoint needs
``inbox``. Groups and the conversation list (1:1 and groups merged): ``groups/apis.py``.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.auth import principal, require_any_scope, require_sender
from api.fields import path_ids
from api.models import Scope
from api.views import ERROR_SCHEMA, ERRORS, ApiView, validated
from messaging import selectors, services
from messaging.serializers import (
    DeleteAllOut,
    HistoryPageOut,
    HistoryQuery,
    MessageOut,
    ReadIn,
    ReadOut,
    RecallOut,
    SendIn,
)


# -- messages --------------------------------------------------------------------------------------
class MessageSendApi(ApiView):
    """Send a 1:1 message as one of the client's senders (``send``) or as any user (``users``);
    a retry replays the original."""

    @extend_schema(
        operation_id="message_send",
        tags=["Messages (1:1)"],
        summary="Send a 1:1 message",
        description=(
            "Business rules the schema cannot express: `receiver_uid` equal to `sender_uid` "
            "answers 400 (a user cannot message themselves); a receiver who blocked the sender "
            "answers 403."
        ),
        request=SendIn,
        responses={
            201: MessageOut,
            200: OpenApiResponse(MessageOut, "replay: the original"),
            409: OpenApiResponse(ERROR_SCHEMA, "client_msg_id reused for another body"),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        client = require_any_scope(request, Scope.SEND, Scope.USERS)
        data = validated(SendIn, request.data)
        if not client.acts_for_users:
            require_sender(request, data["sender_uid"])
        result = services.message_send(**data)
        return Response(MessageOut(result).data, status=201 if result.created else 200)


class MessageRecallApi(ApiView):
    """Recall a message: its sender's client within 2 minutes, or an operator client."""

    @extend_schema(
        operation_id="message_recall",
        tags=["Messages (1:1)"],
        summary="Recall a 1:1 message",
        request=None,
        responses={200: RecallOut, **ERRORS},
    )
    def post(self, request: Request, msgkey: str) -> Response:
        key = path_ids(msgkey=msgkey)["msgkey"]
        message = services.message_recall_for_client(principal=principal(request), msgkey=key)
        return Response(RecallOut(message).data)


# -- conversations (scope inbox) ------------------------------------------------------------------
class InboxApi(ApiView):
    """Per-user endpoints of the consumer front end's backend (scope ``inbox``)."""

    required_scope = Scope.INBOX


class ConversationApi(InboxApi):
    """Delete a whole conversation from this user's side only."""

    @extend_schema(
        operation_id="conversation_delete",
        tags=["Conversations"],
        summary="Delete a conversation (this side only)",
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, uid: str, peer_uid: str) -> Response:
        ids = path_ids(uid=uid, peer_uid=peer_uid)
        services.conversation_delete(owner_uid=ids["uid"], peer_uid=ids["peer_uid"])
        return Response(status=204)


class HistoryApi(InboxApi):
    """A conversation's messages, newest first; recalled ones keep their place, no content."""

    @extend_schema(
        operation_id="conversation_history",
        tags=["Messages (1:1)"],
        summary="Read a conversation's messages",
        parameters=[HistoryQuery],
        responses={200: HistoryPageOut, **ERRORS},
    )
    def get(self, request: Request, uid: str, peer_uid: str) -> Response:
        ids = path_ids(uid=uid, peer_uid=peer_uid)
        query = validated(HistoryQuery, request.query_params)
        page = selectors.history(ids["uid"], ids["peer_uid"], **query)
        return Response(HistoryPageOut(page).data)


class ConversationMessageApi(InboxApi):
    """Delete one message from this user's side only."""

    @extend_schema(
        operation_id="message_delete",
        tags=["Messages (1:1)"],
        summary="Delete one message (this side only)",
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, uid: str, peer_uid: str, msgkey: str) -> Response:
        ids = path_ids(uid=uid, peer_uid=peer_uid, msgkey=msgkey)
        services.message_delete(
            owner_uid=ids["uid"], peer_uid=ids["peer_uid"], msgkey=ids["msgkey"]
        )
        return Response(status=204)


class ConversationReadApi(InboxApi):
    """Move the read position to the newest message, or to ``upto_msgkey``."""

    @extend_schema(
        operation_id="conversation_mark_read",
        tags=["Conversations"],
        summary="Mark a conversation read",
        request=ReadIn,
        responses={200: ReadOut, **ERRORS},
    )
    def post(self, request: Request, uid: str, peer_uid: str) -> Response:
        ids = path_ids(uid=uid, peer_uid=peer_uid)
        data = validated(ReadIn, request.data)
        unread = services.conversation_mark_read(
            owner_uid=ids["uid"], peer_uid=ids["peer_uid"], upto_msgkey=data.get("upto_msgkey")
        )
        return Response(ReadOut({"unread": unread}).data)


class UserMessagesApi(InboxApi):
    """Delete everything this user holds (their side only)."""

    @extend_schema(
        operation_id="messages_delete_all",
        tags=["Messages (1:1)"],
        summary="Delete everything a user holds",
        responses={200: DeleteAllOut, **ERRORS},
    )
    def delete(self, request: Request, uid: str) -> Response:
        owner = path_ids(uid=uid)["uid"]
        deleted = services.messages_delete_all(owner_uid=owner)
        return Response(DeleteAllOut({"conversations_deleted": deleted}).data)


class BlockApi(InboxApi):
    """Block (PUT) or unblock (DELETE) a sender for this user."""

    @extend_schema(
        operation_id="block_set",
        tags=["Conversations"],
        summary="Block a sender",
        description=(
            "Block `peer_uid` for this user: its 1:1 sends to them answer 403 and its campaigns "
            "skip them. Business rule the schema cannot express: `peer_uid` equal to `uid` "
            "answers 400 (a user cannot block themselves)."
        ),
        request=None,
        responses={204: None, **ERRORS},
    )
    def put(self, request: Request, uid: str, peer_uid: str) -> Response:
        return self._set(uid, peer_uid, blocked=True)

    @extend_schema(
        operation_id="block_unset",
        tags=["Conversations"],
        summary="Unblock a sender",
        description=(
            "Unblock `peer_uid` for this user (nothing happens if it was not blocked). Business "
            "rule the schema cannot express: `peer_uid` equal to `uid` answers 400."
        ),
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, uid: str, peer_uid: str) -> Response:
        return self._set(uid, peer_uid, blocked=False)

    def _set(self, uid: str, peer_uid: str, *, blocked: bool) -> Response:
        ids = path_ids(uid=uid, peer_uid=peer_uid)
        services.block_set(owner_uid=ids["uid"], blocked_uid=ids["peer_uid"], blocked=blocked)
        return Response(status=204)
