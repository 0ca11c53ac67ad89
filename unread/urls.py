"""Unread and announcement routes (mounted under /api/v1/); ids are matched as text and validated
by the views."""

from django.urls import path

from unread import apis

urlpatterns = [
    path("users/<str:uid>/unread", apis.UnreadApi.as_view(), name="unread"),
    path("announcements", apis.AnnouncementPublishApi.as_view(), name="announcement-publish"),
    path(
        "users/<str:uid>/announcements",
        apis.UserAnnouncementsApi.as_view(),
        name="user-announcements",
    ),
    path(
        "users/<str:uid>/announcements/read",
        apis.UserAnnouncementsReadApi.as_view(),
        name="user-announcements-read",
    ),
]
