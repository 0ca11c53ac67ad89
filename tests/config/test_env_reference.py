"""docs/configuration.md names every environment variable the code reads.

The scan parses the Python sources of the product (every package of the checkout, ``manage.py``
and ``scripts/*.py``; not ``tests/``) with ``ast`` and collects the names read from the
environment with a literal name: ``os.environ.get("X")``, ``os.getenv("X")``,
``os.environ["X"]``, ``"X" in os.environ``, ``os.environ.setdefault("X", ...)``, and the
settings' own helpers (any function named ``env`` or ``env_<kind>``, e.g. ``env_int("X", 5)``).
A name built by an f-string (``env(f"STORE_TIMEOUT_{store}_S", ...)``) is a family: its fixed
parts with ``*`` between them, satisfied by any documented name it matches. A name read but
missing from the reference fails the test, which names it: an operator must be able to find every
knob in the repository's own docs.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "configuration.md"
SKIPPED_DIRS = {"tests", "docs", "var", "node_modules", "__pycache__"}
HELPER = re.compile(r"^_?env(_[a-z0-9]+)?$")
DOCUMENTED = re.compile(r"`([A-Z][A-Z0-9_]*)`")


def product_sources() -> Iterator[Path]:
    """The checkout's own Python files: top-level packages, manage.py and scripts/."""
    yield ROOT / "manage.py"
    yield from sorted((ROOT / "scripts").glob("*.py"))
    for top in sorted(p for p in ROOT.iterdir() if p.is_dir() and _is_package_dir(p)):
        yield from sorted(top.rglob("*.py"))


def _is_package_dir(path: Path) -> bool:
    hidden = path.name.startswith(".") or path.name.endswith(".egg-info")
    return not hidden and path.name not in SKIPPED_DIRS and (path / "__init__.py").exists()


def _is_environ(node: ast.AST) -> bool:
    """``os.environ`` or a bare ``environ`` (``from os import environ``)."""
    if isinstance(node, ast.Attribute):
        return node.attr == "environ" and isinstance(node.value, ast.Name)
    return isinstance(node, ast.Name) and node.id == "environ"


def _literal(node: ast.AST | None) -> str | None:
    """A literal name, or an f-string's family pattern (``*`` for each formatted part)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(part) or "*" for part in node.values)
    return None


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    first = _literal(call.args[0]) if call.args else None
    if isinstance(func, ast.Attribute) and func.attr in ("get", "setdefault", "pop"):
        return first if _is_environ(func.value) else None
    if isinstance(func, ast.Attribute) and func.attr == "getenv":
        return first
    if isinstance(func, ast.Name) and (func.id == "getenv" or HELPER.match(func.id)):
        return first
    return None


def _read_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call):
        return _call_name(node)
    if isinstance(node, ast.Subscript) and _is_environ(node.value):
        return _literal(node.slice) if isinstance(node.ctx, ast.Load) else None
    if isinstance(node, ast.Compare) and any(_is_environ(c) for c in node.comparators):
        return _literal(node.left)
    return None


def names_read(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return {name for node in ast.walk(tree) if (name := _read_name(node))}


def variables_read() -> dict[str, list[str]]:
    """Each variable name read anywhere in the product → the files that read it."""
    found: dict[str, list[str]] = {}
    for path in product_sources():
        for name in names_read(path):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def documented() -> set[str]:
    return set(DOCUMENTED.findall(REFERENCE.read_text(encoding="utf-8")))


def is_listed(name: str, listed: set[str]) -> bool:
    return any(fnmatch.fnmatchcase(doc, name) for doc in listed) if "*" in name else name in listed


def test_every_variable_the_code_reads_is_in_the_configuration_reference() -> None:
    listed = documented()
    read = variables_read()
    missing = {name: files for name, files in read.items() if not is_listed(name, listed)}
    assert not missing, "docs/configuration.md does not list: " + "; ".join(
        f"{name} (read in {', '.join(sorted(files))})" for name, files in sorted(missing.items())
    )


def test_the_scan_sees_each_way_settings_read_the_environment() -> None:
    # A scan that found nothing would pass the test above vacuously.
    read = variables_read()
    for name in ("MISSIVE_VAR_DIR", "DATABASE_URL", "BULK_LEASE_S", "EMBEDDED_REDIS_PORT"):
        assert name in read, f"the scan missed {name}"
    assert "config/settings.py" in read["BULK_LEASE_S"]
