"""Input and output serializers of the groups API (API.md "Groups"). Ids follow the platform's
rules (``api.fields``): JSON integers or numeric strings in, strings out."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from api.fields import (
    PAGE_MAX,
    TIMESTAMP_SCHEMA,
    IdField,
    StrictBooleanField,
    StrictCharField,
    TimestampField,
    utc_timestamp,
)
from groups.models import UIDS_PER_CALL
from messaging.serializers import (
    CLIENT_MSG_ID_MAX,
    ContentField,
    ConversationOut,
    LastMessageOut,
)
from storage import msgkey as keys

NAME_MAX = 100


def _uids(**kwargs: Any) -> serializers.ListField:
    return serializers.ListField(child=IdField(), max_length=UIDS_PER_CALL, **kwargs)


# -- inputs ----------------------------------------------------------------------------------------
class GroupCreateIn(serializers.Serializer):
    owner_uid = IdField()
    # not trimmed: "  " would pass the schema's minLength and then fail it here
    name = StrictCharField(min_length=1, max_length=NAME_MAX, trim_whitespace=False)
    member_uids = _uids(required=False, default=list)
    history_for_new_members = StrictBooleanField(required=False, default=True)


class MembersAddIn(serializers.Serializer):
    actor_uid = IdField()
    uids = _uids(min_length=1)


class ActorQuery(serializers.Serializer):
    actor_uid = IdField()


class ActorIn(serializers.Serializer):
    actor_uid = IdField()


class GroupSendIn(serializers.Serializer):
    sender_uid = IdField()
    content = ContentField()
    client_msg_id = StrictCharField(
        min_length=1, max_length=CLIENT_MSG_ID_MAX, trim_whitespace=False
    )
    mentions = _uids(required=False, default=list)


class GroupHistoryQuery(serializers.Serializer):
    before_seq = IdField(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=50)


class GroupReadIn(serializers.Serializer):
    upto_seq = IdField(required=False, allow_null=True, min_value=0)


# -- outputs ---------------------------------------------------------------------------------------
class GroupOut(serializers.Serializer):
    gid = IdField()
    name = serializers.CharField()
    owner_uid = IdField()
    member_count = serializers.IntegerField()
    max_seq = serializers.IntegerField()
    created_at = TimestampField()


class MembersAddedOut(serializers.Serializer):
    added = serializers.IntegerField(help_text="members who joined with this call")
    already_members = serializers.IntegerField(help_text="uids that were members already")


class GroupSentOut(serializers.Serializer):
    """A ``services.GroupSendResult``."""

    gid = IdField(source="row.gid")
    msgkey = IdField(source="row.msgkey")
    seq = serializers.IntegerField(source="row.seq")
    sender_uid = IdField(source="row.sender_uid")
    created_at = serializers.SerializerMethodField()

    @extend_schema_field(TIMESTAMP_SCHEMA)
    def get_created_at(self, result: Any) -> str:
        return utc_timestamp(keys.created_at(result.row.msgkey))


class GroupRecallOut(serializers.Serializer):
    gid = IdField()
    seq = serializers.IntegerField()
    msgkey = IdField()
    status = serializers.SerializerMethodField()

    def get_status(self, row: Any) -> str:
        return "recalled" if row.recalled else "normal"


class UserGroupOut(serializers.Serializer):
    gid = IdField()
    name = serializers.CharField()
    unread = serializers.IntegerField()
    mentions = serializers.IntegerField()
    last_message = LastMessageOut(allow_null=True)
    max_seq = serializers.IntegerField()
    read_seq = serializers.IntegerField()
    muted = serializers.BooleanField()


class UserGroupsOut(serializers.Serializer):
    results = UserGroupOut(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="always null: one page")


class GroupHistoryItemOut(serializers.Serializer):
    seq = serializers.IntegerField()
    msgkey = IdField()
    sender_uid = IdField()
    content = ContentField(allow_null=True, help_text="null once recalled")
    created_at = TimestampField()
    status = serializers.ChoiceField(choices=["normal", "recalled"])


class GroupHistoryPageOut(serializers.Serializer):
    results = GroupHistoryItemOut(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="pass as ?before_seq=")


class GroupReadOut(serializers.Serializer):
    read_seq = serializers.IntegerField()
    unread = serializers.IntegerField()


# -- the user's conversation list: 1:1 conversations and groups -------------------------------
class GroupConversationOut(serializers.Serializer):
    """A group of the list (``kind: "group"``)."""

    kind = serializers.CharField()
    gid = IdField()
    name = serializers.CharField()
    category = serializers.CharField()
    unread = serializers.IntegerField()
    mentions = serializers.IntegerField()
    last_message = LastMessageOut(allow_null=True)
    sort_key = IdField(min_value=0)
    pinned = serializers.BooleanField()
    muted = serializers.BooleanField()


LIST_ITEM_SCHEMA = PolymorphicProxySerializer(
    component_name="ConversationListItem",
    serializers={"direct": ConversationOut, "group": GroupConversationOut},
    resource_type_field_name="kind",
)


@extend_schema_field(LIST_ITEM_SCHEMA)
class ListItemField(serializers.Field):
    """A direct conversation or a group, each in its own shape."""

    def to_representation(self, item: Any) -> Any:
        if getattr(item, "kind", "direct") == "group":
            return GroupConversationOut(item).data
        return ConversationOut(item).data


class ConversationPageOut(serializers.Serializer):
    results = serializers.ListField(child=ListItemField())
    next_cursor = serializers.CharField(allow_null=True)
