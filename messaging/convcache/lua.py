"""Registered Lua scripts of the conversation-list cache (``lua/*.lua``).

Every script is ``lua/_common.lua`` (record parsing, the version compare, compare-and-set, caps)
followed by its own file, loaded with ``register_script`` so it survives NOSCRIPT after a restart.
"""

from __future__ import annotations

from pathlib import Path

from infra.luascripts import ScriptRegistry

FOLDER = Path(__file__).parent / "lua"


class _Registry(ScriptRegistry):
    def source(self, name: str) -> str:
        return (self.folder / "_common.lua").read_text() + "\n" + super().source(name)


registry = _Registry(FOLDER)
call = registry.call
