"""Registered Lua scripts of the unread counters (``messaging/counters/lua/*.lua``)."""

from pathlib import Path

from config.luascripts import ScriptRegistry

registry = ScriptRegistry(Path(__file__).parent / "lua")
call = registry.call
