#!/usr/bin/env python
"""Django's command-line utility for Missive.

On the embedded default (no ``REDIS_URL``), a command that had to start the embedded redis-server
stops it again when it ends, so no command leaves a server running that nothing stops; a server
that was already answering (a demo, a worker, ``make demo-admin``) is left alone.

A store that stops answering mid-command (a frozen MariaDB, a partitioned Redis) ends the command
with one line naming the store and exit status 75 (``infra.cli.outage_line``), not a traceback.
"""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except Exception as exc:
        from infra.cli import EX_TEMPFAIL, outage_line

        line = outage_line(sys.argv, exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        sys.exit(EX_TEMPFAIL)
    finally:
        _stop_embedded_redis()


def _stop_embedded_redis() -> None:
    from django.conf import settings

    from infra import embedded

    if settings.configured and getattr(settings, "REDIS_EMBEDDED", False):
        embedded.stop_if_started(settings.VAR_DIR)


if __name__ == "__main__":
    main()
