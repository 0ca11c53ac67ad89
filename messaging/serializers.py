"""Input and output serializers of the messaging API (API.md, "1:1 messages and conversations").

Ids and strings follow the platform's rules (``api.fields``): 64-bit ids as JSON integers or
numeric strings in, strings out; valid Unicode only.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from api.fields import (
    NO_NUL_PATTERN,
    PAGE_MAX,
    TIMESTAMP_SCHEMA,
    IdField,
    StrictCharField,
    StrictRegexField,
    TimestampField,
    has_lone_surrogate,
    id_pattern,
    utc_timestamp,
)
from messaging.models import Category, Message, MessageStatus
from storage import content as contents
from storage import msgkey as keys

CLIENT_MSG_ID_MAX = 64


# -- content (validated in storage.content; these document it) -------------------------------
# The patterns are storage.content's own rules (no NUL; an http(s) URL with a host).
def _text(low: int, high: int) -> serializers.RegexField:
    return serializers.RegexField(NO_NUL_PATTERN, min_length=low or None, max_length=high)


def _url() -> serializers.RegexField:
    return serializers.RegexField(contents.URL_PATTERN, max_length=contents.URL_MAX)


class TextContentSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["text"])
    text = _text(1, contents.TEXT_MAX)


class ImageContentSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["image"])
    url = _url()
    width = serializers.IntegerField(min_value=1, max_value=contents.DIMENSION_MAX)
    height = serializers.IntegerField(min_value=1, max_value=contents.DIMENSION_MAX)


class CardContentSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["card"])
    title = _text(1, contents.TITLE_MAX)
    body = _text(0, contents.CARD_BODY_MAX)
    url = _url()


CONTENT_SCHEMA = PolymorphicProxySerializer(
    component_name="Content",
    # by type value: a list would leave the discriminator's mapping to guess (it wrote "null")
    serializers={
        "text": TextContentSerializer,
        "image": ImageContentSerializer,
        "card": CardContentSerializer,
    },
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


# "sort_key:peer_uid" (storage.convcache.model.Cursor), each 0 .. 2^63-1: what the view takes
_ID_OR_ZERO = id_pattern(0)[1:-1]
CURSOR_PATTERN = f"^{_ID_OR_ZERO}:{_ID_OR_ZERO}$"


class ConversationListQuery(serializers.Serializer):
    category = serializers.ChoiceField(choices=[*Category.values, "group"], required=False)
    cursor = StrictRegexField(
        CURSOR_PATTERN,
        required=False,
        max_length=64,
        error_messages={"invalid": "is not a cursor this API returned."},
    )
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=20)


class HistoryQuery(serializers.Serializer):
    before = IdField(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=50)


# -- outputs -------------------------------------------------------------------------------------
class LastMessageOut(serializers.Serializer):
    msgkey = IdField()
    sender_uid = IdField()
    preview = serializers.CharField()
    created_at = TimestampField()


class ConversationOut(serializers.Serializer):
    """A 1:1 conversation of the list (``kind: "direct"``)."""

    kind = serializers.SerializerMethodField()
    peer_uid = IdField()
    category = serializers.ChoiceField(choices=Category.choices)
    unread = serializers.IntegerField()
    last_message = LastMessageOut(allow_null=True)
    sort_key = IdField(min_value=0)
    pinned = serializers.BooleanField()
    muted = serializers.BooleanField()

    def get_kind(self, item: Any) -> str:
        return "direct"


class HistoryItemOut(serializers.Serializer):
    msgkey = IdField()
    sender_uid = IdField()
    content = ContentField(allow_null=True, help_text="null once recalled")
    created_at = TimestampField()
    status = serializers.ChoiceField(choices=["normal", "recalled"])


class HistoryPageOut(serializers.Serializer):
    results = HistoryItemOut(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="pass as ?before=")


def _created_at(message: Message) -> str:
    return utc_timestamp(keys.created_at(message.msgkey))


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

    @extend_schema_field(TIMESTAMP_SCHEMA)
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
