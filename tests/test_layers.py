"""The dependency direction, read from the code: no import cycle between modules, and each app
imports only the apps below it (docs/design.md, "Layers").

Every ``import`` / ``from ... import`` counts, at module level or inside a function (an import
moved into a function to dodge a cycle is still a cycle). ``config``'s entry points (urls, asgi,
wsgi) wire every app and are imported by no one, so they are left out of both rules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

PACKAGES = ("api", "bulk", "config", "live", "messaging", "unread")
ENTRY_POINTS = {"config.urls", "config.asgi", "config.wsgi"}
# app -> the apps it may import (besides itself); anything else breaks the direction
ALLOWED = {
    "config": set(),
    "api": {"config"},
    "messaging": {"api", "config"},
    "bulk": {"api", "config", "messaging"},
    "unread": {"api", "config", "messaging"},
    "live": {"api", "config", "messaging"},
}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imported(path: Path, known: dict[str, Path]) -> Iterator[str]:
    """The project modules ``path`` imports (a ``from pkg import mod`` names the module)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # ``from config import embedded`` imports config.embedded; ``from config.redis import
            # get_redis`` imports config.redis (the longest known prefix of each name)
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                yield name


def graph() -> dict[str, set[str]]:
    known = modules()
    return {
        name: {m for m in imported(path, known) if m != name and m not in ENTRY_POINTS}
        for name, path in known.items()
        if name not in ENTRY_POINTS
    }


def cycle_from(start: str, edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle through ``start``, or None (depth-first, iterative)."""
    stack = [(start, [start])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for nxt in edges.get(node, ()):
            if nxt == start:
                return [*path, start]
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def test_no_module_is_part_of_an_import_cycle() -> None:
    edges = graph()
    cycles = {" -> ".join(c) for name in edges if (c := cycle_from(name, edges))}
    assert not cycles, sorted(cycles)[:5]


def test_each_app_imports_only_the_apps_below_it() -> None:
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in graph().items()
        for target in targets
        if (app := name.split(".")[0]) != (other := target.split(".")[0])
        and other not in ALLOWED[app]
    )
    assert not wrong, wrong


def test_the_rules_see_the_imports() -> None:
    """The checks above would pass on an empty graph: make sure the scan finds real edges."""
    edges = graph()
    assert "config.redis" in edges["config.outages"]
    assert "messaging.services" in edges["bulk.fanout"]
    assert cycle_from("a", {"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
