"""The WebSocket routes config.asgi serves: the gateway at ``/live/v1``."""

from django.urls import path

from live.consumers import LiveConsumer

websocket_urlpatterns = [path("live/v1", LiveConsumer.as_asgi())]
