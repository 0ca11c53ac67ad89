"""Input and output serializers of the messaging API (API.md, "1:1 messages and conversations").

Ids are 64-bit: requests take a JSON integer or a numeric string (1 .. 2^63-1; booleans, floats,
signs and anything else answer 400 naming the field); responses always send strings.
Strings must be valid Unicode (no lone surrogates): MySQL and Redis could not store them.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from messaging import msgkey as keys
from messaging import selectors
from messaging.models import Category, Message, MessageStatus

MAX_ID = (1 << 63) - 1
ID_PATTERN = re.compile(r"[0-9]{1,19}")
CLIENT_MSG_ID_MAX = 64
PAGE_MAX = 100


@extend_schema_field({"type": "string", "pattern": "^[0-9]{1,19}$", "example": "7301234567890123"})
class IdField(serializers.Field):
    default_error_messages = {
        "invalid": "must be a 64-bit integer id (a JSON number or a string of digits).",
        "range": "must be between {low} and 2^63-1.",
    }

    def __init__(self, *, min_value: int = 1, **kwargs: Any) -> None:
        self.min_value = min_value
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, int) and not isinstance(data, bool):
            value = data
        elif isinstance(data, str) and ID_PATTERN.fullmatch(data):
            value = int(data)
        else:
            self.fail("invalid")
        if not self.min_value <= value <= MAX_ID:
            self.fail("range", low=self.min_value)
        return value

    def to_representation(self, value: int) -> str:
        return str(value)


def path_ids(**raw: str) -> dict[str, int]:
    """Validate ids taken from the URL path; 400 naming every bad one."""
    values, errors = {}, {}
    for name, text in raw.items():
        try:
            values[name] = IdField().run_validation(text)
        except serializers.ValidationError as exc:
            errors[name] = exc.detail
    if errors:
        raise serializers.ValidationError(errors)
    return values


def has_lone_surrogate(value: Any) -> bool:
    """True if any string inside ``value`` cannot be encoded as UTF-8 (walks iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode()
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


class StrictCharField(serializers.CharField):
    """A JSON string and nothing else (DRF's CharField would turn 12 into "12")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if has_lone_surrogate(data):
            raise serializers.ValidationError("must be valid Unicode.")
        return super().to_internal_value(data)


# -- content (validated in messaging.content; these document it) -------------------------------
class TextContentSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["text"])
    text = serializers.CharField(min_length=1, max_length=5000)


class ImageContentSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["image"])
    url = serializers.URLField(max_length=2048)
    width = serializers.IntegerField(min_value=1, max_value=100_000)
    height = serializers.IntegerField(min_value=1, max_value=100_000)


class CardContentSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["card"])
    title = serializers.CharField(min_length=1, max_length=200)
    body = serializers.CharField(allow_blank=True, max_length=2000)
    url = serializers.URLField(max_length=2048)


CONTENT_SCHEMA = PolymorphicProxySerializer(
    component_name="Content",
    serializers=[TextContentSerializer, ImageContentSerializer, CardContentSerializer],
    resource_type_field_name="type",
)


@extend_schema_field(CONTENT_SCHEMA)
class ContentField(serializers.JSONField):
    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be an object with a type.")
        if has_lone_surrogate(data):
            raise serializers.ValidationError("must be valid Unicode.")
        return data


# -- inputs ----------------------------------------------------------------------------------------
class SendIn(serializers.Serializer):
    sender_uid = IdField()
    receiver_uid = IdField()
    content = ContentField()
    client_msg_id = StrictCharField(
        min_length=1, max_length=CLIENT_MSG_ID_MAX, trim_whitespace=False
    )


class ReadIn(serializers.Serializer):
    upto_msgkey = IdField(required=False, allow_null=True)


class ConversationListQuery(serializers.Serializer):
    category = serializers.ChoiceField(choices=Category.choices, required=False)
    cursor = serializers.CharField(required=False, max_length=64)
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=20)

    def validate_cursor(self, value: str) -> str:
        try:
            parts = selectors.parse_cursor(value)
        except (ValueError, TypeError) as exc:
            raise serializers.ValidationError("is not a cursor this API returned.") from exc
        if parts is None or not all(0 <= p <= MAX_ID for p in parts):
            raise serializers.ValidationError("is not a cursor this API returned.")
        return value


class HistoryQuery(serializers.Serializer):
    before = IdField(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=50)


# -- outputs -------------------------------------------------------------------------------------
# The error body (config.exceptions) as OpenAPI: a serializer cannot declare a "fields" field.
ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "error": {"type": "string", "example": "invalid"},
        "detail": {"type": "string"},
        "fields": {"type": "object", "additionalProperties": {"type": "string"}},
    },
    "required": ["error", "detail"],
}


class LastMessageOut(serializers.Serializer):
    msgkey = IdField()
    sender_uid = IdField()
    preview = serializers.CharField()
    created_at = serializers.CharField()


class ConversationOut(serializers.Serializer):
    peer_uid = IdField()
    category = serializers.ChoiceField(choices=Category.choices)
    unread = serializers.IntegerField()
    last_message = LastMessageOut(allow_null=True)
    sort_key = IdField(min_value=0)
    pinned = serializers.BooleanField()
    muted = serializers.BooleanField()


class ConversationPageOut(serializers.Serializer):
    results = ConversationOut(many=True)
    next_cursor = serializers.CharField(allow_null=True)


class HistoryItemOut(serializers.Serializer):
    msgkey = IdField()
    sender_uid = IdField()
    content = ContentField(allow_null=True, help_text="null once recalled")
    created_at = serializers.CharField()
    status = serializers.ChoiceField(choices=["normal", "recalled"])


class HistoryPageOut(serializers.Serializer):
    results = HistoryItemOut(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="pass as ?before=")


def _created_at(message: Message) -> str:
    return keys.created_at(message.msgkey).isoformat()


def _status(message: Message) -> str:
    return str(MessageStatus(message.status).label)


class MessageOut(serializers.Serializer):
    """A ``services.SendResult``."""

    msgkey = IdField(source="message.msgkey")
    sender_uid = IdField(source="message.sender_uid")
    receiver_uid = IdField()
    content = ContentField(source="message.body")
    created_at = serializers.SerializerMethodField()
    status = serializers.SerializerMethodField()

    def get_created_at(self, result: Any) -> str:
        return _created_at(result.message)

    def get_status(self, result: Any) -> str:
        return _status(result.message)


class RecallOut(serializers.Serializer):
    msgkey = IdField()
    status = serializers.SerializerMethodField()

    def get_status(self, message: Message) -> str:
        return _status(message)


class ReadOut(serializers.Serializer):
    unread = serializers.IntegerField(help_text="the conversation's unread count after the read")


class DeleteAllOut(serializers.Serializer):
    conversations_deleted = serializers.IntegerField()


class UnreadByCategoryOut(serializers.Serializer):
    followed = serializers.IntegerField()
    stranger = serializers.IntegerField()
    business = serializers.IntegerField()
    system = serializers.IntegerField()


class UnreadOut(serializers.Serializer):
    total = serializers.IntegerField()
    by_category = UnreadByCategoryOut()
    announcements = serializers.IntegerField()
