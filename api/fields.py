"""Id and string fields every API shares (API.md: ids are 64-bit and travel as JSON strings).

Requests take an id as a JSON integer or a numeric string (1 .. 2^63-1; booleans, floats, signs
and anything else answer 400 naming the field); responses always send strings. Strings must be
valid Unicode (no lone surrogates): MySQL and Redis could not store them.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from infra.sqlvalues import MAX_ID

PAGE_MAX = 100  # API lists are keyset-paged (``next_cursor``), never by offset; this caps ``limit``
ID_PATTERN = re.compile(r"[0-9]{1,19}")


def id_pattern(low: int = 1) -> str:
    """The ECMA/Python regex of exactly what ``IdField`` takes as a string: 1 to 19 digits (leading
    zeros allowed, so at most 19 characters: the schema adds ``maxLength``) whose value is ``low``
    (0 or 1) .. 2^63-1, spelt digit by digit against 2^63-1 since a regex cannot compare numbers."""
    top = str(MAX_ID)
    alternatives = [f"[1-9][0-9]{{0,{len(top) - 2}}}"]
    for i, digit in enumerate(top):
        first, last = (1 if i == 0 else 0), int(digit) - 1
        if last >= first:
            rest = len(top) - i - 1
            alternatives.append(f"{top[:i]}[{first}-{last}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    alternatives.append(top)
    if low == 0:
        alternatives.insert(0, "0")
    return "^0*(?:" + "|".join(alternatives) + ")$"


def id_string_schema(low: int = 1) -> dict[str, Any]:
    """An id as a decimal string, exactly as the API takes it (and sends it: without zeros)."""
    return {
        "type": "string",
        "maxLength": 19,
        "pattern": id_pattern(low),
        "example": "7301234567890123",
    }


def id_request_schema(low: int = 1) -> dict[str, Any]:
    """An id in a JSON body: an integer or a decimal string (API.md)."""
    number = {"type": "integer", "format": "int64", "minimum": low, "maximum": MAX_ID}
    return {"oneOf": [number, id_string_schema(low)]}


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


class IdFieldSchema(OpenApiSerializerFieldExtension):
    """Documents ``IdField`` as what it takes: in a body an integer or a string of digits, in a
    query a string of digits, and in a response always the string."""

    target_class = IdField
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        low = self.target.min_value
        if direction == "request" and auto_schema.method in {"POST", "PUT", "PATCH"}:
            return id_request_schema(low)
        return id_string_schema(low)


# Every timestamp the API sends: UTC, milliseconds, "+00:00" (what most responses already sent).
TIMESTAMP_PATTERN = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}\+00:00$"
TIMESTAMP_SCHEMA = {
    "type": "string",
    "format": "date-time",
    "pattern": TIMESTAMP_PATTERN,
    "example": "2026-11-24T13:45:25.123+00:00",
}


def utc_timestamp(when: datetime | str) -> str:
    """``when`` (aware, or ISO-8601 text) as the API's one timestamp format."""
    moment = datetime.fromisoformat(when) if isinstance(when, str) else when
    return moment.astimezone(UTC).isoformat(timespec="milliseconds")


@extend_schema_field(TIMESTAMP_SCHEMA)
class TimestampField(serializers.Field):
    """A read-only timestamp in the API's one format (``utc_timestamp``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(read_only=True, **kwargs)

    def to_representation(self, value: datetime | str) -> str:
        return utc_timestamp(value)


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


class StrictBooleanField(serializers.BooleanField):
    """JSON ``true`` or ``false`` and nothing else: DRF's BooleanField takes 0, "yes" and "no",
    and a typo in ``dry_run`` must not launch a real campaign."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


NO_NUL_PATTERN = "^[^\\x00]*$"  # DRF's CharField refuses NUL; the schema says so


class StrictRegexField(serializers.RegexField):
    """A JSON string matching ``regex`` whole and nothing else: DRF's RegexField takes 12 as "12",
    and its ``search`` lets ``$`` match before a final newline, which the schema's does not."""

    def __init__(self, regex: str, **kwargs: Any) -> None:
        self.whole = re.compile(regex)
        super().__init__(regex, **kwargs)

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str) or not self.whole.fullmatch(data):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictCharField(serializers.CharField):
    """A JSON string and nothing else (DRF's CharField would turn 12 into "12")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if has_lone_surrogate(data):
            raise serializers.ValidationError("must be valid Unicode.")
        return super().to_internal_value(data)


class StrictCharFieldSchema(OpenApiSerializerFieldExtension):
    """A ``StrictCharField`` as DRF's string, plus the NUL it refuses."""

    target_class = StrictCharField
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema = auto_schema._map_serializer_field(self.target, direction, bypass_extensions=True)
        return {**schema, "pattern": NO_NUL_PATTERN}
