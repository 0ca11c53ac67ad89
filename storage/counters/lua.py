"""Registered Lua scripts of the unread counters (``storage/counters/lua/*.lua``)."""

from pathlib import Path

from infra.luascripts import ScriptRegistry

registry = ScriptRegistry(Path(__file__).parent / "lua")
call = registry.call
