"""Live delivery's HTTP routes (mounted under /api/v1/); the WebSocket route is live/routing.py."""

from django.urls import path

from live import apis

urlpatterns = [
    path("users/<str:uid>/live-tokens", apis.LiveTokenApi.as_view(), name="live-tokens"),
    path("users/<str:uid>/presence", apis.PresenceApi.as_view(), name="presence"),
]
