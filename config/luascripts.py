"""A per-app registry of Lua scripts kept as ``.lua`` files beside the code that calls them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from redis.commands.core import Script

from config.redis import get_redis


class ScriptRegistry:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @cache  # noqa: B019 - one registry per app, alive for the whole process
    def script(self, name: str) -> Script:
        return get_redis().register_script((self.folder / f"{name}.lua").read_text())

    def call(self, name: str, keys: Sequence[Any], args: Sequence[Any], client: Any = None) -> Any:
        """Run script ``name``; ``client`` may be a pipeline to batch it with other commands."""
        return self.script(name)(keys=list(keys), args=list(args), client=client)
