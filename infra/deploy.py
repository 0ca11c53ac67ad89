"""The secret key, decided at start-up: never a known value unless DEBUG says "development".

- DJANGO_SECRET_KEY set: that.
- DJANGO_DEBUG=1: a fixed development key (sessions and signatures of a dev box mean nothing).
- The one-machine mode (no REDIS_URL: ``make demo``, ``make demo-admin``, a command on the demo's
  data): a random key made once and kept in ``<MISSIVE_VAR_DIR>/secret_key`` (mode 0600), so the
  admin's sessions survive a restart and no two installs share a key.
- Otherwise (a deployment on real services with DEBUG off): ``secret_key`` raises
  ImproperlyConfigured, and the settings stop the process with that one sentence on stderr
  (``stop``), no traceback, whichever program imported them (manage.py, gunicorn, celery).
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path
from typing import NoReturn

from django.core.exceptions import ImproperlyConfigured

DEV_KEY = "missive-dev-only-not-secret"
KEY_FILE = "secret_key"
# The exit status of a process the settings stop: gunicorn's "App failed to load" (its arbiter
# shuts down instead of starting new workers that would stop the same way, over and over).
START_UP_FAILED = 4
MISSING = (
    "DJANGO_SECRET_KEY is not set and DJANGO_DEBUG is off: set DJANGO_SECRET_KEY to a long "
    "random value (python -c 'import secrets; print(secrets.token_urlsafe(50))') in every web "
    "and worker process's environment."
)


def secret_key(given: str, *, debug: bool, one_machine: bool, var_dir: Path) -> str:
    if given:
        return given
    if debug:
        return DEV_KEY
    if one_machine:
        return _kept_key(var_dir / KEY_FILE)
    raise ImproperlyConfigured(MISSING)


def stop(reason: str) -> NoReturn:
    """Stop the process at start-up with ``reason``, one line on stderr."""
    print(f"missive: {reason}", file=sys.stderr, flush=True)
    raise SystemExit(START_UP_FAILED)


def _kept_key(path: Path) -> str:
    if not path.exists():
        # written whole under a temporary name, then linked: a process starting beside this one
        # reads either no file or the whole key, and the first link wins
        tmp = path.with_name(f".{KEY_FILE}.{os.getpid()}")
        tmp.write_text(secrets.token_urlsafe(50))
        tmp.chmod(0o600)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()
