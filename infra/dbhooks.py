"""Code run on every database connection object Django makes, before its first connect.

Django has no hook before a connect (``connection_created`` comes after it), so its connection
handler's factory is wrapped, once, on this one handler object; each installer registered runs on
every connection object made from then on (one per thread and alias: under ASGI each request's
thread has its own). The circuit breakers (breakers.py) and the statements' mark (statements.py)
install themselves this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.db import connections

Installer = Callable[[Any], None]
_installers: list[Installer] = []


def on_new_connections(install: Installer) -> None:
    """Run ``install`` on the connection objects this thread made already and on each one Django
    makes from now on (once per installer). Django makes the primary's while it loads the
    models, before any app is ready: a Celery worker's tasks and a management command run on
    that one, so an installer must cover it too."""
    for connection in connections.all(initialized_only=True):
        install(connection)
    if install not in _installers:
        _installers.append(install)
    create = connections.create_connection
    if getattr(create, "hooked", False):
        return

    def create_hooked(alias: str) -> Any:
        connection = create(alias)
        for installer in _installers:
            installer(connection)
        return connection

    create_hooked.hooked = True  # type: ignore[attr-defined]
    connections.create_connection = create_hooked  # type: ignore[method-assign]
