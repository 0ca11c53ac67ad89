"""Input and output serializers of the campaign API (API.md, "Campaigns (bToC bulk)").

Ids follow the messaging API (messaging.serializers.IdField): a JSON integer or a numeric string
in, always a string out. An audience spec is one of four shapes, chosen by ``type``; its fields
are checked strictly (unknown keys answer 400) and normalised for storage: datetimes become
ISO-8601 strings, ``exclude_uids`` a sorted list of ints, ``uids`` a list of strings parsed later
line by line (bulk.audiences), so a bad entry is counted as skipped-invalid, not refused.
Lists over MAX_LIST entries answer 413.

``upload_lines`` turns a streamed upload into text lines in bounded memory: a file without
newlines cannot make one line grow past LINE_MAX_BYTES (the rest of it is dropped and the line
marked, so it is counted invalid).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers

from api.errors import TooLarge
from api.fields import PAGE_MAX, IdField, StrictBooleanField, StrictCharField, TimestampField
from bulk.models import AudienceType, CampaignStatus, Channel
from messaging.serializers import ContentField
from storage import content as contents

MAX_LIST = 10_000
LINE_MAX_BYTES = 1024
CUT_MARK = "…"


class BoundedListField(serializers.ListField):
    """A JSON array of at most MAX_LIST entries; more answers 413 (not 400)."""

    def __init__(self, *, path: str, **kwargs: Any) -> None:
        self.path = path
        super().__init__(**kwargs)

    def to_internal_value(self, data: Any) -> list[Any]:
        if isinstance(data, list) and len(data) > MAX_LIST:
            raise TooLarge(
                f"{self.path} holds more than {MAX_LIST:,} entries.",
                {self.path: f"{len(data)} entries (at most {MAX_LIST})"},
            )
        return list(super().to_internal_value(data))


def _entry_text(value: Any) -> str:
    """One ``uids`` entry as the line it would be in an upload file (cut like one, too)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        text = value.encode("utf-8", "replace").decode()  # lone surrogates cannot be stored
    else:
        text = json.dumps(value, ensure_ascii=False)  # true, 1.5, null, [..]: invalid lines
    return text[:LINE_MAX_BYTES] + CUT_MARK if len(text) > LINE_MAX_BYTES else text


class UidEntriesField(BoundedListField):
    def to_internal_value(self, data: Any) -> list[str]:
        return [_entry_text(v) for v in super().to_internal_value(data)]


# -- audience specs ----------------------------------------------------------------------------
class FollowersSpec(serializers.Serializer):
    type = serializers.ChoiceField(choices=[AudienceType.FOLLOWERS.value])


class FollowersFilterSpec(serializers.Serializer):
    type = serializers.ChoiceField(choices=[AudienceType.FOLLOWERS_FILTER.value])
    followed_after = serializers.DateTimeField(required=False, help_text="ISO-8601")
    followed_before = serializers.DateTimeField(required=False, help_text="ISO-8601")
    exclude_uids = BoundedListField(
        path="audience.exclude_uids", child=IdField(), required=False, max_length=MAX_LIST
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        after, before = attrs.get("followed_after"), attrs.get("followed_before")
        if after and before and after >= before:
            raise serializers.ValidationError({"followed_before": "must be after followed_after."})
        out: dict[str, Any] = {"type": attrs["type"]}
        for name in ("followed_after", "followed_before"):
            if attrs.get(name):
                out[name] = attrs[name].isoformat()
        if attrs.get("exclude_uids"):
            out["exclude_uids"] = sorted(set(attrs["exclude_uids"]))
        return out


class UploadSpec(serializers.Serializer):
    type = serializers.ChoiceField(choices=[AudienceType.UPLOAD.value])
    audience_id = IdField(help_text="from POST /audiences")


class UidsSpec(serializers.Serializer):
    type = serializers.ChoiceField(choices=[AudienceType.UIDS.value])
    uids = UidEntriesField(
        path="audience.uids",
        min_length=1,
        help_text=f"at most {MAX_LIST:,}; entries that are not uids are skipped as invalid",
    )


SPECS: dict[str, type[serializers.Serializer]] = {
    AudienceType.FOLLOWERS: FollowersSpec,
    AudienceType.FOLLOWERS_FILTER: FollowersFilterSpec,
    AudienceType.UPLOAD: UploadSpec,
    AudienceType.UIDS: UidsSpec,
}

AUDIENCE_SCHEMA = PolymorphicProxySerializer(
    component_name="AudienceSpec",
    serializers={str(kind): spec for kind, spec in SPECS.items()},  # mapped by type value
    resource_type_field_name="type",
)


@extend_schema_field(AUDIENCE_SCHEMA)
class AudienceSpecField(serializers.Field):
    def to_internal_value(self, data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise serializers.ValidationError("must be an object with a type.")
        kind = data.get("type")
        spec_class = SPECS.get(kind) if isinstance(kind, str) else None
        if spec_class is None:
            raise serializers.ValidationError({"type": f"must be one of {', '.join(SPECS)}."})
        spec = spec_class(data=data)
        unknown = sorted(set(data) - set(spec.fields))
        if unknown:
            raise serializers.ValidationError(dict.fromkeys(unknown, "unexpected field."))
        spec.is_valid(raise_exception=True)
        return dict(spec.validated_data)

    def to_representation(self, value: Any) -> Any:
        return value


# -- campaigns ---------------------------------------------------------------------------------
NAME_MAX = 200


class CampaignCreateIn(serializers.Serializer):
    sender_uid = IdField()
    name = StrictCharField(
        max_length=NAME_MAX,
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=True,
        help_text=f"a label for operators (optional, at most {NAME_MAX} characters)",
    )
    content = ContentField()
    audience = AudienceSpecField()
    channel = serializers.ChoiceField(choices=Channel.choices, default=Channel.DAILY)
    scheduled_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
    dry_run = StrictBooleanField(default=False)

    def validate_content(self, value: Any) -> dict[str, Any]:
        return contents.validate_content(value)  # InvalidInput names the field (400)


class CampaignListQuery(serializers.Serializer):
    status = serializers.ChoiceField(choices=CampaignStatus.choices, required=False)
    cursor = IdField(required=False, help_text="next_cursor of the previous page")
    limit = serializers.IntegerField(min_value=1, max_value=PAGE_MAX, default=50)


class SkippedOut(serializers.Serializer):
    quota = serializers.IntegerField()
    blocked = serializers.IntegerField()
    invalid = serializers.IntegerField()
    duplicate = serializers.IntegerField()


class AudienceRefOut(serializers.Serializer):
    type = serializers.ChoiceField(choices=AudienceType.choices)
    id = IdField(allow_null=True, help_text="the stored audience (upload, uids)")


class CampaignOut(serializers.Serializer):
    """A ``bulk.selectors.campaign_progress`` dict."""

    id = IdField()
    name = serializers.CharField(allow_blank=True, help_text="the operators' label; may be empty")
    sender_uid = IdField()
    msgkey = IdField(allow_null=True, help_text="the message; POST /messages/{msgkey}/recall")
    status = serializers.ChoiceField(choices=CampaignStatus.choices)
    channel = serializers.ChoiceField(choices=Channel.choices)
    audience = AudienceRefOut()
    total = serializers.IntegerField(help_text="recipients planned so far (final once planned)")
    delivered = serializers.IntegerField()
    skipped = SkippedOut()
    failed = serializers.IntegerField()
    rate_per_s = serializers.FloatField()
    eta_s = serializers.FloatField(allow_null=True)
    scheduled_at = TimestampField(allow_null=True)
    created_at = TimestampField()
    started_at = TimestampField(allow_null=True)
    finished_at = TimestampField(allow_null=True)
    pause_reason = serializers.CharField(allow_null=True)


class CampaignPageOut(serializers.Serializer):
    results = CampaignOut(many=True)
    next_cursor = serializers.CharField(allow_null=True, help_text="pass as ?cursor=")


class WouldSkipOut(serializers.Serializer):
    blocked = serializers.IntegerField(source="would_skip_blocked")
    quota = serializers.IntegerField(source="would_skip_quota")
    invalid = serializers.IntegerField(source="would_skip_invalid")
    duplicate = serializers.IntegerField(source="would_skip_duplicate")


class DryRunOut(serializers.Serializer):
    """A ``bulk.services.Preview``."""

    dry_run = serializers.SerializerMethodField()
    audience = serializers.IntegerField(help_text="recipients the campaign would walk")
    would_skip = WouldSkipOut(source="*")
    would_deliver = serializers.IntegerField()
    budget_remaining = serializers.IntegerField(
        allow_null=True, help_text="today's daily-channel budget left; null when unlimited"
    )

    def get_dry_run(self, preview: Any) -> bool:
        return True


# -- audiences ---------------------------------------------------------------------------------
@extend_schema_field({"type": "string", "format": "binary", "minLength": 1})
class UploadFileField(serializers.FileField):
    """A file part (binary), not the URI drf-spectacular documents a FileField as by default."""


class AudienceUploadIn(serializers.Serializer):
    """Documents the multipart form; a raw ``text/plain`` body works too."""

    file = UploadFileField(help_text="one uid per line, any size")


class InvalidSampleOut(serializers.Serializer):
    line = serializers.IntegerField()
    text = serializers.CharField()
    reason = serializers.CharField()


class AudienceOut(serializers.Serializer):
    id = IdField()
    count = serializers.IntegerField(help_text="distinct valid uids")
    invalid_lines = serializers.IntegerField()
    duplicate_lines = serializers.IntegerField()
    invalid_samples = InvalidSampleOut(many=True)


def upload_lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """The lines of a streamed upload, decoded and without their line endings; memory stays
    under LINE_MAX_BYTES + one chunk whatever the upload holds."""
    line, cut = bytearray(), False
    for chunk in chunks:
        for part in chunk.splitlines(keepends=True):
            if not cut:
                line += part
                if len(line) > LINE_MAX_BYTES:
                    del line[LINE_MAX_BYTES:]
                    cut = True
            if part.endswith((b"\n", b"\r")):
                yield _decoded(line, cut)
                line, cut = bytearray(), False
    if line:
        yield _decoded(line, cut)


def _decoded(line: bytearray, cut: bool) -> str:
    text = line.decode("utf-8", "replace").rstrip("\r\n")  # the ending is no part of a sample
    return text + CUT_MARK if cut else text
