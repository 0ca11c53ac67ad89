"""Unread HTTP API (API.md): a user's unread summary (``GET /users/{uid}/unread``, scope ``inbox``;
``unread/fastpath.py`` answers the same request faster in front of Django) and announcements
(``POST /announcements`` needs ``announce``; the per-user list and mark-read need ``inbox``).
Thin views over unread/selectors.py and unread/announcements.py. Ids travel as strings.

The unread answer's body is ``unread.answer.unread_body``'s, the fast path's too; ``UnreadOut``
is its schema (and renders to the same bytes: tests/unread/test_answer.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_field,
)
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from api.auth import principal
from api.fields import NO_NUL_PATTERN, PAGE_MAX, TIMESTAMP_SCHEMA, IdField, path_ids, utc_timestamp
from api.models import Scope
from api.views import ERROR_SCHEMA, ERRORS, ApiView, idempotency_key, validated
from messaging.services import conversation_list_prewarm
from storage.content import TEXT_MAX
from unread import announcements, selectors
from unread.answer import CONTENT_TYPE

# What announcements.normalise takes: a plain string is the text of a text content.
PUBLISH_CONTENT_SCHEMA = {
    "oneOf": [
        {"type": "string", "minLength": 1, "maxLength": TEXT_MAX, "pattern": NO_NUL_PATTERN},
        {"$ref": "#/components/schemas/Content"},
    ],
    "description": 'a string (plain text) or a content object, e.g. {"type": "text", "text": "…"}',
}


@extend_schema_field(PUBLISH_CONTENT_SCHEMA)
class PublishContentField(serializers.JSONField):
    """Validated by announcements.normalise (400 naming the field)."""


class PublishIn(serializers.Serializer):
    content = PublishContentField()


class AnnouncementOut(serializers.Serializer):
    id = IdField()
    content = serializers.JSONField()
    published_at = serializers.SerializerMethodField()

    @extend_schema_field(TIMESTAMP_SCHEMA)
    def get_published_at(self, item: Any) -> str:
        return utc_timestamp(datetime.fromtimestamp(item.published_ms / 1000, tz=UTC))


class UserAnnouncementOut(AnnouncementOut):
    read = serializers.BooleanField()


class AnnouncementPageOut(serializers.Serializer):
    results = UserAnnouncementOut(many=True)
    unread = serializers.IntegerField()
    next_cursor = serializers.CharField(allow_null=True, help_text="pass as ?cursor=")


class AnnouncementListQuery(serializers.Serializer):
    cursor = IdField(required=False)
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=20)


class UnreadAnnouncementsOut(serializers.Serializer):
    unread = serializers.IntegerField()


class UnreadByCategoryOut(serializers.Serializer):
    followed = serializers.IntegerField()
    stranger = serializers.IntegerField()
    business = serializers.IntegerField()
    system = serializers.IntegerField()
    group = serializers.IntegerField()


class UnreadOut(serializers.Serializer):
    total = serializers.IntegerField(help_text="1:1 and group unread (not announcements)")
    by_category = UnreadByCategoryOut()
    announcements = serializers.IntegerField()
    mentions = serializers.IntegerField(help_text="unread @mentions in groups")


class UnreadApi(ApiView):
    """Unread counts: total, per category (groups too), unread announcements and mentions."""

    required_scope = Scope.INBOX

    @extend_schema(
        operation_id="unread_summary",
        tags=["Unread"],
        summary="A user's unread counts",
        responses={200: UnreadOut, **ERRORS},
    )
    def get(self, request: Request, uid: str) -> HttpResponse:
        owner = path_ids(uid=uid)["uid"]
        conversation_list_prewarm(owner)  # a big UP's list is built before they open it
        return HttpResponse(selectors.unread_answer(owner), content_type=CONTENT_TYPE)


class AnnouncementPublishApi(ApiView):
    """Publish an announcement to every user (O(1): nothing is written per user)."""

    required_scope = Scope.ANNOUNCE

    @extend_schema(
        operation_id="announcement_publish",
        tags=["Announcements"],
        summary="Publish an announcement to every user",
        request=PublishIn,
        parameters=[
            OpenApiParameter(
                "Idempotency-Key",
                str,
                OpenApiParameter.HEADER,
                description="a retried publish with the same key and content returns the same "
                "announcement (200), published once; the same key with other content answers 409",
            )
        ],
        responses={
            201: AnnouncementOut,
            200: OpenApiResponse(AnnouncementOut, "an Idempotency-Key replay: the original"),
            409: OpenApiResponse(ERROR_SCHEMA, "Idempotency-Key reused for other content"),
            **ERRORS,
        },
    )
    def post(self, request: Request) -> Response:
        data = validated(PublishIn, request.data)
        who, key = principal(request), idempotency_key(request)
        if key is None:
            row = announcements.announcement_publish(content=data["content"], published_by=who.name)
            return Response(AnnouncementOut(row).data, status=201)
        row, created = announcements.announcement_publish_once(
            content=data["content"],
            published_by=who.name,
            once=announcements.Once(who.client_id, key),
        )
        return Response(AnnouncementOut(row).data, status=201 if created else 200)


class UserAnnouncementsApi(ApiView):
    """Announcements newest first, each with whether this user has read it."""

    required_scope = Scope.INBOX

    @extend_schema(
        operation_id="announcements_list",
        tags=["Announcements"],
        summary="List announcements for a user",
        parameters=[AnnouncementListQuery],
        responses={200: AnnouncementPageOut, **ERRORS},
    )
    def get(self, request: Request, uid: str) -> Response:
        owner = path_ids(uid=uid)["uid"]
        query = validated(AnnouncementListQuery, request.query_params)
        page = announcements.announcements_for(
            owner, before=query.get("cursor"), limit=query["limit"]
        )
        return Response(AnnouncementPageOut(page).data)


class UserAnnouncementsReadApi(ApiView):
    """Mark every announcement read for this user."""

    required_scope = Scope.INBOX

    @extend_schema(
        operation_id="announcements_mark_read",
        tags=["Announcements"],
        summary="Mark every announcement read",
        request=None,
        responses={200: UnreadAnnouncementsOut, **ERRORS},
    )
    def post(self, request: Request, uid: str) -> Response:
        owner = path_ids(uid=uid)["uid"]
        left = announcements.announcements_mark_read(uid=owner)
        return Response(UnreadAnnouncementsOut({"unread": left}).data)
