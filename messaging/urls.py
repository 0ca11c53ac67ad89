"""Messaging API routes (mounted under /api/v1/). Ids are matched as text and validated by the
views, so a malformed id answers 400 naming the field instead of an HTML 404."""

from django.urls import path

from messaging import apis
from messaging.groups import apis as groups

USER = "users/<str:uid>"
CONV = f"{USER}/conversations/<str:peer_uid>"
GROUP = "groups/<str:gid>"
MEMBER_GROUP = f"{USER}/groups/<str:gid>"

urlpatterns = [
    path("messages", apis.MessageSendApi.as_view(), name="message-send"),
    path("messages/<str:msgkey>/recall", apis.MessageRecallApi.as_view(), name="message-recall"),
    path(f"{USER}/conversations", apis.ConversationListApi.as_view(), name="conversation-list"),
    path(CONV, apis.ConversationApi.as_view(), name="conversation"),
    path(f"{CONV}/messages", apis.HistoryApi.as_view(), name="conversation-history"),
    path(
        f"{CONV}/messages/<str:msgkey>",
        apis.ConversationMessageApi.as_view(),
        name="conversation-message",
    ),
    path(f"{CONV}/read", apis.ConversationReadApi.as_view(), name="conversation-read"),
    path(f"{USER}/messages", apis.UserMessagesApi.as_view(), name="user-messages"),
    path(f"{USER}/blocks/<str:peer_uid>", apis.BlockApi.as_view(), name="block"),
    # groups (read diffusion)
    path("groups", groups.GroupCreateApi.as_view(), name="group-create"),
    path(GROUP, groups.GroupApi.as_view(), name="group"),
    path(f"{GROUP}/members", groups.GroupMembersApi.as_view(), name="group-members"),
    path(f"{GROUP}/members/<str:uid>", groups.GroupMemberApi.as_view(), name="group-member"),
    path(f"{GROUP}/messages", groups.GroupMessagesApi.as_view(), name="group-messages"),
    path(
        f"{GROUP}/messages/<str:seq>/recall",
        groups.GroupRecallApi.as_view(),
        name="group-message-recall",
    ),
    path(f"{USER}/groups", groups.UserGroupsApi.as_view(), name="user-groups"),
    path(f"{MEMBER_GROUP}/messages", groups.UserGroupHistoryApi.as_view(), name="group-history"),
    path(f"{MEMBER_GROUP}/read", groups.UserGroupReadApi.as_view(), name="group-read"),
    path(
        f"{MEMBER_GROUP}/messages/<str:seq>",
        groups.UserGroupMessageApi.as_view(),
        name="group-message",
    ),
]
