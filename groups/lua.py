"""Registered Lua scripts of group chat (``lua/*.lua``). The member scripts (``member_*``) are
``lua/_member.lua`` (parsing and writing a position) followed by their own file, the head
scripts (``head_*``) ``lua/_summary.lua`` (the unread summary) followed by theirs; every script is
loaded with ``register_script``, so it survives NOSCRIPT after a restart. Each touches the keys of
one hash tag: a group's (``{g:<gid>}``) or a user's (``{u:<uid>}``)."""

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
        body = (self.folder / f"{name}.lua").read_text()
        shared = "_member.lua" if name.startswith("member_") else "_summary.lua"
        body = (self.folder / shared).read_text() + "\n" + body
        return get_redis().register_script(body)


registry = _Registry(FOLDER)
call = registry.call
