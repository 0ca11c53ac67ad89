"""The live app's Lua scripts (``live/lua/*.lua``), registered once per process (EVALSHA; a
Redis that lost its script cache gets them again: infra.luascripts)."""

from pathlib import Path

from infra.luascripts import ScriptRegistry

scripts = ScriptRegistry(Path(__file__).parent / "lua")
