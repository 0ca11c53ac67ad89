"""Registered Lua scripts of the messaging app (``storage/lua/*.lua``).

Scripts are loaded with ``register_script``: redis-py sends EVALSHA and falls back to EVAL on
NOSCRIPT, so they survive a Redis restart or failover.
"""

from __future__ import annotations

from pathlib import Path

from infra.luascripts import ScriptRegistry

registry = ScriptRegistry(Path(__file__).parent / "lua")
call = registry.call
