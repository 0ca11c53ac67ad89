"""The management commands' one convention for list flags and ids.

A store that stops answering while a command runs ends it with one line on stderr naming the
store (``outage_line``, printed by manage.py) and exit status 75 (EX_TEMPFAIL: try again later),
not a traceback.

A list flag takes comma-separated values, may be repeated, and may be followed by several values:
``--uids 1,2 --uids 3`` = ``--uids 1 2 3`` = ``--uids 1,2,3``. Each value is converted by the
flag's ``type`` (a bad one is argparse's one-line error, exit 2); the result is a list in the
order given.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from typing import Any

from infra.store_errors import unavailable_store

MAX_ID = (1 << 63) - 1
EX_TEMPFAIL = 75  # sysexits.h: a temporary failure, the caller is invited to retry


class CommaList(argparse.Action):
    """``nargs="+"`` whose values are split at commas, extending the list on every repeat."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.item: Callable[[str], Any] = kwargs.pop("type", None) or str
        kwargs.setdefault("nargs", "+")
        kwargs.setdefault("default", [])
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        found = list(getattr(namespace, self.dest, None) or [])
        for text in values if isinstance(values, list) else [values]:
            found.extend(self._convert(parser, part.strip()) for part in text.split(",") if part)
        setattr(namespace, self.dest, found)

    def _convert(self, parser: argparse.ArgumentParser, text: str) -> Any:
        try:
            return self.item(text)
        except (TypeError, ValueError):
            parser.error(f"{'/'.join(self.option_strings) or self.dest}: invalid value {text!r}")


def positive_id(text: str) -> int:
    """A uid or campaign id: 1 .. 2^63-1."""
    value = int(text)
    if not 0 < value <= MAX_ID:
        raise ValueError(text)
    return value


def outage_line(argv: Sequence[str], exc: BaseException) -> str | None:
    """The one line a command that met ``exc`` prints when a store did not answer, else None."""
    found = unavailable_store(exc)
    if found is None:
        return None
    store, said = found
    command = argv[1] if len(argv) > 1 else "manage.py"
    return (
        f"{command}: stopped because {store} did not answer ({said}). What the command had "
        "committed stays; run it again once the store answers."
    )
