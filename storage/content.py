"""Message content types and their limits (API.md): text, image, card.

``validate_content`` returns the normalised body or raises InvalidContent naming the field; it runs
before anything is stored. InvalidContent is the platform's InvalidInput (infra/errors.py): the
API answers it 400 ``invalid`` with its detail and fields, the admin and the commands show it.
"""

from __future__ import annotations

import re
from typing import Any

from infra.errors import InvalidInput

TEXT_MAX = 5000
TITLE_MAX = 200
CARD_BODY_MAX = 2000
URL_MAX = 2048
DIMENSION_MAX = 100_000
# http or https, a host (no "/", "?" or "#" right after "//"), no space or control character:
# the schema documents this very pattern (messaging.serializers).
URL_PATTERN = r"^https?://[^\x00-\x20\x7f/?#][^\x00-\x20\x7f]*$"


class InvalidContent(InvalidInput):
    """A content body its type does not allow; ``fields`` names the field (``content.text``)."""


def validate_content(content: Any) -> dict[str, Any]:
    if not isinstance(content, dict):
        raise InvalidContent("content must be an object with a type.", {"content": "not an object"})
    kind = content.get("type")
    validator = VALIDATORS.get(kind) if isinstance(kind, str) else None
    if validator is None:
        raise InvalidContent(
            "content.type must be one of text, image, card.", {"content.type": "unknown type"}
        )
    return {"type": kind, **validator(content)}


def _text(content: dict[str, Any]) -> dict[str, Any]:
    return {"text": _string(content, "text", 1, TEXT_MAX)}


def _image(content: dict[str, Any]) -> dict[str, Any]:
    return {
        "url": _url(content, "url"),
        "width": _dimension(content, "width"),
        "height": _dimension(content, "height"),
    }


def _card(content: dict[str, Any]) -> dict[str, Any]:
    return {
        "title": _string(content, "title", 1, TITLE_MAX),
        "body": _string(content, "body", 0, CARD_BODY_MAX),
        "url": _url(content, "url"),
    }


VALIDATORS = {"text": _text, "image": _image, "card": _card}


def _string(content: dict[str, Any], name: str, low: int, high: int) -> str:
    value = content.get(name)
    if not isinstance(value, str):
        raise InvalidContent(
            f"content.{name} must be a string.", {f"content.{name}": "not a string"}
        )
    if not low <= len(value) <= high:  # len() counts code points: a 4-byte emoji is one
        raise InvalidContent(
            f"content.{name} must be {low} to {high} characters long.",
            {f"content.{name}": f"length {len(value)}"},
        )
    if "\x00" in value:
        raise InvalidContent(f"content.{name} must not contain NUL.", {f"content.{name}": "NUL"})
    return value


def _url(content: dict[str, Any], name: str) -> str:
    value = _string(content, name, 1, URL_MAX)
    if not re.fullmatch(URL_PATTERN, value):
        raise InvalidContent(
            f"content.{name} must be an http(s) URL.", {f"content.{name}": "bad URL"}
        )
    return value


def _dimension(content: dict[str, Any], name: str) -> int:
    value = content.get(name)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= DIMENSION_MAX:
        raise InvalidContent(
            f"content.{name} must be an integer from 1 to {DIMENSION_MAX}.",
            {f"content.{name}": "bad dimension"},
        )
    return value


def preview(content_type: str, body: dict[str, Any], limit: int = 60) -> str:
    if content_type == "text":
        text = str(body.get("text", ""))
        return text if len(text) <= limit else text[: limit - 1] + "…"
    if content_type == "image":
        return "[image]"
    return f"[card] {body.get('title', '')}"[:limit]
