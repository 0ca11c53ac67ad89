"""The dependency direction, read from the code (docs/design.md, "Layers"): no import cycle
between modules; each package imports only the floors and apps below it; and an app that uses
another app goes through that app's public modules (models, services, selectors, serializers,
apis, and the named read models), never its keys, state, Lua or cache internals.

Every ``import`` / ``from ... import`` counts, at module level or inside a function (an import
moved into a function to dodge a cycle is still a cycle). ``config``'s entry points (urls, asgi,
wsgi, celery) wire every app and are imported by no one, so they are left out of the rules.

Tasks are links too: the code sends a task from its object, never by a name in a string (a name
is a link no import, type check or rule here would see).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import ROOT

ENTRY_POINTS = {"config.urls", "config.asgi", "config.wsgi", "config.celery", "config"}
# The floors, bottom up: the platform (infra: clients, breakers, metrics; adminsite: the admin's
# shared pieces; api: the HTTP platform), then storage, then the apps.
PLATFORM = {"infra", "adminsite", "api"}
FLOORS = PLATFORM | {"storage"}
# package -> what it may import (besides itself); anything else breaks the direction
ALLOWED = {
    "config": {"infra"},  # settings read deploy checks and logging from the platform
    "infra": set(),
    "adminsite": {"infra"},
    "api": {"infra", "adminsite"},
    "storage": {"infra"},  # not the HTTP platform: its refusals come from infra/errors.py
    "messaging": FLOORS,
    "groups": FLOORS | {"messaging"},
    "bulk": FLOORS | {"messaging"},
    "unread": FLOORS | {"messaging", "groups"},
    "live": FLOORS | {"messaging", "groups"},
    "retention": FLOORS | {"messaging", "groups", "bulk"},
    "cachesync": FLOORS | {"messaging", "groups", "unread"},
}
PACKAGES = tuple(ALLOWED)
# What an app offers the apps above it; the rest of it is its own business.
PUBLIC = {"models", "services", "selectors", "serializers", "apis", "admin", "tasks"}
READ_MODELS = {"messaging.convlist", "messaging.pushes"}  # one read model each (docs/design.md)


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py") if (ROOT / package).is_dir() else ():
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
            # ``from infra import embedded`` imports infra.embedded; ``from infra.redis import
            # get_redis`` imports infra.redis (the longest known prefix of each name)
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


def test_an_app_uses_another_only_through_its_public_modules() -> None:
    apps = set(ALLOWED) - FLOORS - {"config"}
    wrong = sorted(
        f"{name} imports {target}"
        for name, targets in graph().items()
        for target in targets
        if (app := name.split(".")[0]) in apps
        and (other := target.split(".")[0]) in apps
        and other != app
        and not _public(target)
    )
    assert not wrong, wrong


def _public(module: str) -> bool:
    parts = module.split(".")
    return module in READ_MODELS or (len(parts) == 2 and parts[1] in PUBLIC)


def send_task_calls(path: Path) -> Iterator[int]:
    """Lines of ``path`` that send a task by name: every ``send_task(...)`` (its first argument is
    a task name, in a literal, an f-string or a constant alike) and ``signature("...")``."""
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        first = node.args[0] if node.args else None
        by_string = isinstance(first, ast.JoinedStr) or (
            isinstance(first, ast.Constant) and isinstance(first.value, str)
        )
        if called == "send_task" or (called in ("signature", "subtask") and by_string):
            yield node.lineno


def test_tasks_are_sent_by_reference_not_by_name() -> None:
    """A task is sent from its object (``task.apply_async``, or an ``infra.taskref.TaskRef`` bound
    in ``AppConfig.ready`` when the sender sits below the task's module), never by a name."""
    wrong = sorted(
        f"{name}:{line}" for name, path in modules().items() for line in send_task_calls(path)
    )
    assert not wrong, wrong


def test_the_senders_hold_the_task_objects() -> None:
    """The refs bound in ``AppConfig.ready`` are the task objects themselves."""
    from bulk import recall, services
    from bulk import tasks as bulk_tasks
    from messaging import tasks as messaging_tasks
    from storage.convcache import prewarm

    assert services.PLAN_TASK["daily"].task is bulk_tasks.plan_daily
    assert services.PLAN_TASK["priority"].task is bulk_tasks.plan_priority
    assert services.RUN_BATCH_TASK["daily"].task is bulk_tasks.run_batch_daily
    assert services.RUN_BATCH_TASK["priority"].task is bulk_tasks.run_batch_priority
    assert recall.TASK.task is bulk_tasks.recall_batch
    assert prewarm.TASK.task is messaging_tasks.convcache_prewarm
    assert [t.name for t in (bulk_tasks.recall_batch, messaging_tasks.convcache_prewarm)] == [
        "bulk.recall_batch",
        "messaging.convcache_prewarm",
    ]


def test_the_rules_see_the_imports() -> None:
    """The checks above would pass on an empty graph: make sure the scan finds real edges."""
    edges = graph()
    assert "infra.redis" in edges["infra.outages"]
    assert "messaging.services" in edges["bulk.fanout"]
    assert cycle_from("a", {"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]
    assert "infra.errors" in edges["storage.content"]


def test_the_send_task_rule_sees_a_send_by_name(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        'TASK = "bulk.recall_batch"\n'
        "app.send_task(TASK, args=[1])\n"
        'current_app.send_task(f"bulk.{channel}.plan")\n'
        'signature("messaging.send")\n'
        "task.apply_async(args=[1])\n"
        "task.signature((1,))\n"
    )
    assert list(send_task_calls(sample)) == [2, 3, 4]
