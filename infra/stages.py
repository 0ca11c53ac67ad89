"""Where one unit of work (a bulk batch) spends its wall time, stage by stage, collected cheaply.

``collect()`` opens a record for the current context (a ``ContextVar``, so threads and tasks do
not mix records); ``lap(name)`` adds the time since the record's previous lap (or its start) to
``name``. Laps tile the unit's time with no gaps, so the stages add up to the whole; a stage that
laps twice adds up. With no record open ``lap`` is one ``ContextVar.get``: code shared with paths
nobody profiles (a 1:1 send runs the same ``deliver_many`` as a bulk batch) pays nothing else.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field


@dataclass
class Record:
    started: float = field(default_factory=time.perf_counter)
    last: float = 0.0
    seconds: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.last = self.started

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.seconds[name] = self.seconds.get(name, 0.0) + now - self.last
        self.last = now

    @property
    def total(self) -> float:
        return self.last - self.started


_current: ContextVar[Record | None] = ContextVar("stages_record", default=None)


@contextmanager
def collect() -> Iterator[Record]:
    record = Record()
    reset = _current.set(record)
    try:
        yield record
    finally:
        _current.reset(reset)


def lap(name: str) -> None:
    record = _current.get()
    if record is not None:
        record.lap(name)
