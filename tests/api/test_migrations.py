"""Moving API clients from ``messaging`` to ``api`` keeps every row: a database migrated to the
old layout, holding a client, its sender and an audience that points at it, is migrated forward
and still holds all three, under the new table names, with the foreign keys intact.

Runs ``manage.py`` in subprocesses on a scratch database of each engine (SQLite for the demo,
MariaDB for production), so the test database of the suite is never migrated backwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

ROOT = Path(__file__).resolve().parents[2]
OLD_STATE = [("bulk", "0002_campaign_paused_time"), ("unread", "0001_initial")]

SEED = """
from django.db import connection
with connection.cursor() as c:
    c.execute("INSERT INTO messaging_apiclient (id, name, token_hash, token_prefix, scopes,"
              " is_operator, is_active, created_at) VALUES (7, 'shop', 'h', 'msv_abcd',"
              " '[\\"send\\"]', 0, 1, '2026-01-01 00:00:00')")
    c.execute("INSERT INTO messaging_apiclientsender (id, client_id, uid) VALUES (3, 7, 42)")
    c.execute("INSERT INTO bulk_audience (id, sender_uid, name, count, invalid_lines,"
              " duplicate_lines, invalid_samples, created_at, client_id)"
              " VALUES (5, 42, 'list', 1, 0, 0, '[]', '2026-01-01 00:00:00', 7)")
"""

CHECK = """
from api.models import ApiClient
from bulk.models import Audience
client = ApiClient.objects.get(pk=7)
print(client.name, client.scopes, list(client.senders.values_list("uid", flat=True)),
      Audience.objects.get(pk=5).client.name, ApiClient._meta.db_table)
"""


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(params=["sqlite", "mariadb"])
def scratch_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "MISSIVE_VAR_DIR": str(tmp_path)}
    if request.param == "sqlite":
        env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'old.sqlite3'}"
        yield env
        return
    db = settings.DATABASES["default"]
    name = f"migr_{uuid.uuid4().hex[:10]}"
    with connection.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    env["DATABASE_URL"] = (
        f"mysql://{db['USER']}:{db['PASSWORD']}@{db['HOST']}:{db['PORT'] or 3306}/{name}"
    )
    try:
        yield env
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"DROP DATABASE IF EXISTS {name}")


@pytest.mark.django_db
def test_api_clients_move_to_the_api_app_with_every_row(scratch_env: dict[str, str]) -> None:
    for app, migration in OLD_STATE:
        manage(scratch_env, "migrate", app, migration, "-v0")
    manage(scratch_env, "shell", "-v0", "-c", SEED)
    manage(scratch_env, "migrate", "-v0")
    assert manage(scratch_env, "shell", "-v0", "-c", CHECK).split() == [
        "shop",
        "['send']",
        "[42]",
        "shop",
        "api_apiclient",
    ]
