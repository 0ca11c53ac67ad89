"""Messaging API routes (mounted under /api/v1/). Ids are matched as text and validated by the
views, so a malformed id answers 400 naming the field instead of an HTML 404."""

from django.urls import path

from messaging import apis

USER = "users/<str:uid>"
CONV = f"{USER}/conversations/<str:peer_uid>"

urlpatterns = [
    path("messages", apis.MessageSendApi.as_view(), name="message-send"),
    path("messages/<str:msgkey>/recall", apis.MessageRecallApi.as_view(), name="message-recall"),
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
]
