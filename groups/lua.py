"""Registered Lua scripts of group chat (``lua/*.lua``). The member scripts (``member_*``) start
with ``--#include _member.lua`` (parsing and writing a position), the head scripts (``head_*``)
with ``--#include _summary.lua`` (the unread summary: infra.luascripts); every script is loaded
with ``register_script``, so it survives NOSCRIPT after a restart. Each touches the keys of one
hash tag: a group's (``{g:<gid>}``) or a user's (``{u:<uid>}``)."""

from __future__ import annotations

from pathlib import Path

from infra.luascripts import ScriptRegistry

FOLDER = Path(__file__).parent / "lua"

registry = ScriptRegistry(FOLDER)
call = registry.call
