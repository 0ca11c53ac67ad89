"""Groups API routes (mounted under /api/v1/), and the user's conversation list, which merges
their 1:1 conversations with their groups. Ids are matched as text and validated by the views."""

from django.urls import path

from groups import apis

USER = "users/<str:uid>"
GROUP = "groups/<str:gid>"
MEMBER_GROUP = f"{USER}/groups/<str:gid>"

urlpatterns = [
    path(f"{USER}/conversations", apis.ConversationListApi.as_view(), name="conversation-list"),
    path("groups", apis.GroupCreateApi.as_view(), name="group-create"),
    path(GROUP, apis.GroupApi.as_view(), name="group"),
    path(f"{GROUP}/members", apis.GroupMembersApi.as_view(), name="group-members"),
    path(f"{GROUP}/members/<str:uid>", apis.GroupMemberApi.as_view(), name="group-member"),
    path(f"{GROUP}/messages", apis.GroupMessagesApi.as_view(), name="group-messages"),
    path(
        f"{GROUP}/messages/<str:seq>/recall",
        apis.GroupRecallApi.as_view(),
        name="group-message-recall",
    ),
    path(f"{USER}/groups", apis.UserGroupsApi.as_view(), name="user-groups"),
    path(f"{MEMBER_GROUP}/messages", apis.UserGroupHistoryApi.as_view(), name="group-history"),
    path(f"{MEMBER_GROUP}/read", apis.UserGroupReadApi.as_view(), name="group-read"),
    path(
        f"{MEMBER_GROUP}/messages/<str:seq>",
        apis.UserGroupMessageApi.as_view(),
        name="group-message",
    ),
]
