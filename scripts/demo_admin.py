"""``make demo-admin``: Django admin on the data ``make demo`` left behind, with an operator login.

    python scripts/demo_admin.py [--port 8000]

The demo leaves its data in the embedded default's place (the SQLite file ``var/missive.sqlite3``
and the embedded Redis's AOF under ``var/redis/``), so this, ``manage.py runserver`` and every
other management command see it with no extra setting. This serves the admin on that data:
it creates (or resets) the operator ``operator`` with the password ``operator`` (a local demo,
on loopback only), starts the demo's embedded redis-server if none answers, runs Django's
development server until Ctrl-C, then stops the redis-server it started.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEMO_DIR = Path(os.environ.get("MISSIVE_VAR_DIR") or ROOT / "var")
for _name in ("DATABASE_URL", "REDIS_URL", "CELERY_BROKER_URL", "INBOX_BACKEND"):
    os.environ.pop(_name, None)
os.environ["DJANGO_SETTINGS_MODULE"] = "config.settings"
OPERATOR = "operator"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    if not (DEMO_DIR / "missive.sqlite3").exists():
        raise SystemExit("demo-admin: no demo data under var/: run `make demo` first")
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from infra import embedded

    user, _ = get_user_model().objects.get_or_create(username=OPERATOR)
    user.is_staff = user.is_superuser = True
    user.set_password(OPERATOR)
    user.save()
    embedded.ensure_started(settings.VAR_DIR)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # a kill stops Redis too, as Ctrl-C
    print(
        f"admin on the demo's data: http://127.0.0.1:{args.port}/admin/ (login {OPERATOR} / "
        f"{OPERATOR}); Ctrl-C stops it",
        flush=True,
    )
    try:
        call_command(
            "runserver", f"127.0.0.1:{args.port}", use_reloader=False, insecure_serving=True
        )
    finally:
        if embedded.stop_if_started(settings.VAR_DIR):
            print(f"stopped the embedded redis-server on :{embedded.port()}")


if __name__ == "__main__":
    main()
