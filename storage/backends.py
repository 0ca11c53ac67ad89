"""Storage backends chosen in settings by dotted path: ``settings.<SETTING>`` maps a name to a
class (``INBOX_BACKENDS``, ``GROUP_TIMELINE_BACKENDS``), and each store's package asks here for a
fresh instance (contract tests, tools) or the process's one instance of a name."""

from __future__ import annotations

from functools import _lru_cache_wrapper, cache
from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string


def load(setting: str, name: str) -> Any:
    """A new instance of the backend ``name`` of ``settings.<setting>``."""
    return import_string(getattr(settings, setting)[name])()


def per_process(setting: str) -> _lru_cache_wrapper[Any]:
    """``load`` cached by name: one instance per process (``cache_clear`` starts over)."""
    return cache(lambda name: load(setting, name))
