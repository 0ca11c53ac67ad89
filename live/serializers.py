"""Input and output shapes of the live HTTP endpoints (live/apis.py)."""

from __future__ import annotations

from rest_framework import serializers

from api.fields import StrictRegexField, TimestampField


class LiveTokenIn(serializers.Serializer):
    device_id = StrictRegexField(
        r"^[A-Za-z0-9_.-]{1,64}$",
        max_length=64,
        help_text="the device's own id: 1 to 64 characters of A-Z a-z 0-9 _ . -",
    )


class LiveTokenOut(serializers.Serializer):
    token = serializers.CharField(help_text="opens connections for 60 s; bound to uid and device")
    expires_at = TimestampField()
    url = serializers.CharField(help_text="the WebSocket URL to open, token included")


class DeviceOut(serializers.Serializer):
    device_id = serializers.CharField()
    connected_at = TimestampField()


class PresenceOut(serializers.Serializer):
    online = serializers.BooleanField(help_text="at least one device is connected")
    devices = DeviceOut(many=True)
