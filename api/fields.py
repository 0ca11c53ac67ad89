"""Id and string fields every API shares (API.md: ids are 64-bit and travel as JSON strings).

Requests take an id as a JSON integer or a numeric string (1 .. 2^63-1; booleans, floats, signs
and anything else answer 400 naming the field); responses always send strings. Strings must be
valid Unicode (no lone surrogates): MySQL and Redis could not store them.
"""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

MAX_ID = (1 << 63) - 1
ID_PATTERN = re.compile(r"[0-9]{1,19}")


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


class StrictBooleanField(serializers.BooleanField):
    """JSON ``true`` or ``false`` and nothing else: DRF's BooleanField takes 0, "yes" and "no",
    and a typo in ``dry_run`` must not launch a real campaign."""

    def to_internal_value(self, data: Any) -> bool:
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """A JSON string and nothing else (DRF's CharField would turn 12 into "12")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        if has_lone_surrogate(data):
            raise serializers.ValidationError("must be valid Unicode.")
        return super().to_internal_value(data)
