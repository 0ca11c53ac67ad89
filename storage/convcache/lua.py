"""Registered Lua scripts of the conversation-list cache (``lua/*.lua``).

Every script starts with ``--#include _common.lua`` (record parsing, the version compare,
compare-and-set, caps: infra.luascripts), loaded with ``register_script`` so it survives NOSCRIPT
after a restart.
"""

from __future__ import annotations

from pathlib import Path

from infra.luascripts import ScriptRegistry

FOLDER = Path(__file__).parent / "lua"

registry = ScriptRegistry(FOLDER)
call = registry.call
