"""Groups HTTP API (API.md "Groups"): thin views over services and selectors.

Authorisation: writes on ``/groups/...`` need ``users`` (the consumer backend acting for its
users; ``actor_uid`` / ``sender_uid`` / ``owner_uid`` name the user); reads (``GET /groups/{gid}``
and the per-user endpoints) take ``users`` or ``inbox``.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.request import Request
from rest_framework.response import Response

from api.auth import principal, require_any_scope
from api.fields import path_ids
from api.models import Scope
from api.views import ERROR_SCHEMA, ERRORS, ApiView, idempotency_key, validated
from groups import selectors, services
from groups.serializers import (
    ActorIn,
    ActorQuery,
    ConversationPageOut,
    GroupCreateIn,
    GroupHistoryPageOut,
    GroupHistoryQuery,
    GroupOut,
    GroupReadIn,
    GroupReadOut,
    GroupRecallOut,
    GroupSendIn,
    GroupSentOut,
    MembersAddedOut,
    MembersAddIn,
    UserGroupsOut,
)
from messaging.apis import InboxApi
from messaging.serializers import ConversationListQuery

CONFLICT = {409: OpenApiResponse(ERROR_SCHEMA, "over a limit, or an id reused for another body")}


class UsersApi(ApiView):
    """Writes of the consumer backend (scope ``users``)."""

    required_scope = Scope.USERS


class GroupReadApi(ApiView):
    """Reads and per-user actions: scope ``users`` or ``inbox``."""

    def check_permissions(self, request: Request) -> None:
        super().check_permissions(request)
        require_any_scope(request, Scope.USERS, Scope.INBOX)


class GroupCreateApi(UsersApi):
    """Create a group; its owner is a member. ``Idempotency-Key`` replays the original."""

    @extend_schema(
        operation_id="group_create",
        tags=["Groups"],
        summary="Create a group",
        request=GroupCreateIn,
        responses={201: GroupOut, 200: OpenApiResponse(GroupOut, "replay"), **CONFLICT, **ERRORS},
    )
    def post(self, request: Request) -> Response:
        data = validated(GroupCreateIn, request.data)
        key = idempotency_key(request)
        group, created = services.group_create(
            **data, client_id=principal(request).client_id, idempotency_key=key
        )
        return Response(GroupOut(group).data, status=201 if created else 200)


class GroupApi(GroupReadApi):
    """A group's name, owner, member count and newest ``seq``; a dissolved group answers 404."""

    @extend_schema(
        operation_id="group_get",
        tags=["Groups"],
        summary="A group's name, owner and counts",
        responses={200: GroupOut, **ERRORS},
    )
    def get(self, request: Request, gid: str) -> Response:
        group = selectors.group_live(path_ids(gid=gid)["gid"])
        return Response(GroupOut(group).data)


class GroupMembersApi(UsersApi):
    """Add members (the owner or an admin), at most 1,000 per call."""

    @extend_schema(
        operation_id="group_members_add",
        tags=["Groups"],
        summary="Add members",
        request=MembersAddIn,
        responses={200: MembersAddedOut, **CONFLICT, **ERRORS},
    )
    def post(self, request: Request, gid: str) -> Response:
        group = path_ids(gid=gid)["gid"]
        data = validated(MembersAddIn, request.data)
        added = services.group_members_add(gid=group, **data)
        return Response(MembersAddedOut(added).data)


class GroupMemberApi(UsersApi):
    """Leave (uid = actor_uid) or remove a member (the owner or an admin)."""

    @extend_schema(
        operation_id="group_member_remove",
        tags=["Groups"],
        summary="Leave a group, or remove a member",
        parameters=[ActorQuery],
        responses={204: None, **CONFLICT, **ERRORS},
    )
    def delete(self, request: Request, gid: str, uid: str) -> Response:
        ids = path_ids(gid=gid, uid=uid)
        actor = validated(ActorQuery, request.query_params)["actor_uid"]
        services.group_member_remove(gid=ids["gid"], actor_uid=actor, uid=ids["uid"])
        return Response(status=204)


class GroupMessagesApi(UsersApi):
    """Send to a group as a member; the same (sender_uid, client_msg_id) replays the original."""

    @extend_schema(
        operation_id="group_message_send",
        tags=["Groups"],
        summary="Send a message to a group",
        request=GroupSendIn,
        responses={
            201: GroupSentOut,
            200: OpenApiResponse(GroupSentOut, "replay: the original"),
            **CONFLICT,
            **ERRORS,
        },
    )
    def post(self, request: Request, gid: str) -> Response:
        group = path_ids(gid=gid)["gid"]
        data = validated(GroupSendIn, request.data)
        result = services.group_message_send(gid=group, **data)
        return Response(GroupSentOut(result).data, status=201 if result.created else 200)


class GroupRecallApi(UsersApi):
    """Recall a message for everyone: its sender within the window, or the owner or an admin."""

    @extend_schema(
        operation_id="group_message_recall",
        tags=["Groups"],
        summary="Recall a group message for everyone",
        request=ActorIn,
        responses={200: GroupRecallOut, **ERRORS},
    )
    def post(self, request: Request, gid: str, seq: str) -> Response:
        ids = path_ids(gid=gid, seq=seq)
        actor = validated(ActorIn, request.data)["actor_uid"]
        row = services.group_message_recall(gid=ids["gid"], seq=ids["seq"], actor_uid=actor)
        return Response(GroupRecallOut(row).data)


class UserGroupsApi(GroupReadApi):
    """The user's groups, most recent activity first."""

    @extend_schema(
        operation_id="user_groups",
        tags=["Groups"],
        summary="List a user's groups",
        responses={200: UserGroupsOut, **ERRORS},
    )
    def get(self, request: Request, uid: str) -> Response:
        items = selectors.user_groups(path_ids(uid=uid)["uid"])
        return Response(UserGroupsOut({"results": items, "next_cursor": None}).data)


class UserGroupHistoryApi(GroupReadApi):
    """What this member may see, newest first; 404 for a user who never joined."""

    @extend_schema(
        operation_id="group_history",
        tags=["Groups"],
        summary="Read a group's messages as a member",
        parameters=[GroupHistoryQuery],
        responses={200: GroupHistoryPageOut, **ERRORS},
    )
    def get(self, request: Request, uid: str, gid: str) -> Response:
        ids = path_ids(uid=uid, gid=gid)
        query: dict[str, Any] = validated(GroupHistoryQuery, request.query_params)
        page = selectors.group_history(ids["uid"], ids["gid"], **query)
        return Response(GroupHistoryPageOut(page).data)


class UserGroupReadApi(GroupReadApi):
    """Move the member's read position (never backwards)."""

    @extend_schema(
        operation_id="group_mark_read",
        tags=["Groups"],
        summary="Mark a group read",
        request=GroupReadIn,
        responses={200: GroupReadOut, **ERRORS},
    )
    def post(self, request: Request, uid: str, gid: str) -> Response:
        ids = path_ids(uid=uid, gid=gid)
        upto = validated(GroupReadIn, request.data).get("upto_seq")
        read, unread = services.group_mark_read(gid=ids["gid"], uid=ids["uid"], upto_seq=upto)
        return Response(GroupReadOut({"read_seq": read, "unread": unread}).data)


class UserGroupMessageApi(GroupReadApi):
    """Delete one group message for this member only."""

    @extend_schema(
        operation_id="group_message_hide",
        tags=["Groups"],
        summary="Delete a group message (this member only)",
        responses={204: None, **ERRORS},
    )
    def delete(self, request: Request, uid: str, gid: str, seq: str) -> Response:
        ids = path_ids(uid=uid, gid=gid, seq=seq)
        services.group_message_hide(gid=ids["gid"], uid=ids["uid"], seq=ids["seq"])
        return Response(status=204)


# -- the user's conversation list (scope inbox) -----------------------------------------------
class ConversationListApi(InboxApi):
    """A user's conversations and groups, newest activity first, optionally of one category
    (``group``: groups only)."""

    @extend_schema(
        operation_id="conversation_list",
        tags=["Conversations"],
        summary="List a user's conversations and groups",
        parameters=[ConversationListQuery],
        responses={200: ConversationPageOut, **ERRORS},
    )
    def get(self, request: Request, uid: str) -> Response:
        ids = path_ids(uid=uid)
        query = validated(ConversationListQuery, request.query_params)
        page = selectors.conversations_and_groups(ids["uid"], **query)
        return Response(ConversationPageOut(page).data)
