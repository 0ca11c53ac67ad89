"""Registered Lua scripts of the bulk app (``bulk/lua/*.lua``)."""

from pathlib import Path

from infra.luascripts import ScriptRegistry

registry = ScriptRegistry(Path(__file__).parent / "lua")
call = registry.call
