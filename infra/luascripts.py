"""A per-app registry of Lua scripts kept as ``.lua`` files beside the code that calls them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from redis.commands.core import Script

from infra.redis import get_redis


class ScriptRegistry:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @cache  # noqa: B019 - one registry per app, alive for the whole process
    def script(self, name: str) -> Script:
        return get_redis().register_script((self.folder / f"{name}.lua").read_text())

    def call(self, name: str, keys: Sequence[Any], args: Sequence[Any], client: Any = None) -> Any:
        """Run script ``name``; ``client`` may be a pipeline to batch it with other commands."""
        return self.script(name)(keys=list(keys), args=list(args), client=client)


# Scripts of the platform itself (``config/lua``): the token bucket behind channel rates
# (bulk.quotas) and API clients' write rates (api.throttles).
platform = ScriptRegistry(Path(__file__).parent / "lua")


def take_tokens(key: str, *, rate_per_s: float, capacity: float, want: int, now_ms: int) -> int:
    """Take ``want`` tokens from the bucket at ``key``: 0 when taken, else ms until there are."""
    return int(platform.call("token_bucket", [key], [rate_per_s, capacity, want, now_ms]))
