"""Registered Lua scripts of the conversation-list cache (``lua/*.lua``).

Every script is ``lua/_common.lua`` (record parsing, the version compare, compare-and-set, caps)
followed by its own file, loaded with ``register_script`` so it survives NOSCRIPT after a restart.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from redis.commands.core import Script

from infra.luascripts import ScriptRegistry
from infra.redis import get_redis

FOLDER = Path(__file__).parent / "lua"


class _Registry(ScriptRegistry):
    @cache  # noqa: B019 - one registry, alive for the whole process
    def script(self, name: str) -> Script:
        common = (self.folder / "_common.lua").read_text()
        body = (self.folder / f"{name}.lua").read_text()
        return get_redis().register_script(common + "\n" + body)


registry = _Registry(FOLDER)
call = registry.call
