"""The cursor: an opaque string naming one position in one user's event log.

It is ``<epoch>.<position>.<ms>``: the log's epoch (a random word that changes whenever the log
starts afresh, so a cursor into a log Redis lost is recognised, never misread as a position in
the new one), the position (1, 2, 3 ... per user) and when it was issued (ms since the Unix
epoch: a cursor from an older epoch is ``too_old`` past ``LIVE_RESUME_WINDOW_S``, ``lost``
before it). Clients store it and send it back as ``since``; they never parse it.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

_FORMAT = re.compile(r"^([0-9a-f]{1,32})\.([0-9]{1,18})\.([0-9]{1,15})$")


@dataclass(frozen=True)
class Cursor:
    epoch: str
    pos: int
    ms: int

    def __str__(self) -> str:
        return f"{self.epoch}.{self.pos}.{self.ms}"


def parse(text: str) -> Cursor | None:
    """The cursor ``text`` names, or None when it is not one of ours."""
    found = _FORMAT.match(text)
    if found is None:
        return None
    return Cursor(found[1], int(found[2]), int(found[3]))


def new_epoch() -> str:
    return secrets.token_hex(6)


def frame(event_json: str, cursor: Cursor) -> str:
    """The frame a device receives: the event's JSON object with its ``cursor`` added (spliced,
    not re-parsed: events are JSON objects with at least a ``type``)."""
    return f'{event_json[:-1]},"cursor":"{cursor}"}}'
