"""Multi-row VALUES lists for the bulk write paths, built without per-value client escaping.

MySQLdb escapes every parameter in Python (``literal`` per value): for a 1,000-row, 5-column
insert that is 5,000 calls and was the largest single cost of a fan-out batch (28 ms of 127 ms
per batch, profiled). Values here are numbers formatted as integers (``%d``: a string raises) and
strings drawn from a fixed allowlist, so inlining them is safe and needs no escaping.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence

MAX_ID = (1 << 63) - 1  # BIGINT's largest value: every id Missive stores fits in one


def int_rows(rows: Iterable[Sequence[int]]) -> str:
    """``(1,2,3),(4,5,6)`` from integer tuples of one width. ``%d`` takes numbers only (a string
    raises) and is four times faster than ``str(int(v))`` per value (1.5 → 0.4 ms for a 1,000-row,
    5-column batch, measured)."""
    rows = [tuple(row) for row in rows]
    if not rows:
        return ""
    row_format = "(" + ",".join(["%d"] * len(rows[0])) + ")"
    return ",".join([row_format % row for row in rows])


def int_list(values: Iterable[int]) -> str:
    """``1,2,3`` for an ``IN (...)`` list."""
    return ",".join([f"{v:d}" for v in values])


def json_ids(values: Iterable[int], column: str = "id") -> str:
    """A MariaDB/MySQL row source of one BIGINT ``column`` per value, in order:
    ``JSON_TABLE('[1,2,3]', '$[*]' COLUMNS (id BIGINT PATH '$'))``. A bulk write of one message
    to many owners selects its constants beside it instead of repeating them as literals on every
    VALUES row: the server parses one token a row, not five or nine (measured on MariaDB 10.11:
    conversation upsert 9.3 → 6.0 ms of server CPU per 1,000 rows, inbox 4.0 → 3.3)."""
    if not column.isidentifier():
        raise ValueError(f"{column!r} is not a column name")
    return f"JSON_TABLE('[{int_list(values)}]', '$[*]' COLUMNS ({column} BIGINT PATH '$'))"


def choice(value: str, allowed: Collection[str]) -> str:
    """A quoted SQL literal for ``value``, which must be one of ``allowed`` (plain words)."""
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {sorted(allowed)}")
    return f"'{value}'"
