"""Deployment settings as an operator meets them: ``manage.py check --deploy`` is clean under the
production settings the operations guide gives (TLS at a proxy, or Django's own redirect and
HSTS); a deployment with DEBUG off and no DJANGO_SECRET_KEY, or with a count or duration that is
not a number, stops at start-up with one sentence; the one-machine mode keeps a random key of its
own."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PRODUCTION = {
    "DJANGO_SETTINGS_MODULE": "config.settings",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "api.example.com",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://api.example.com",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "X-Forwarded-Proto",
}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_clean(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert "System check identified no issues (0 silenced)" in done.stdout or (
        "System check identified no issues" in done.stdout
    )
    assert "WARNING" not in done.stdout + done.stderr


def test_check_deploy_is_clean_with_tls_at_the_proxy() -> None:
    assert_clean(manage("check", "--deploy", **PRODUCTION, DJANGO_TLS_AT_PROXY="1"))


def test_check_deploy_is_clean_with_djangos_own_redirect_and_hsts() -> None:
    done = manage(
        "check",
        "--deploy",
        **PRODUCTION,
        DJANGO_SECURE_SSL_REDIRECT="1",
        DJANGO_SECURE_HSTS_SECONDS="31536000",
        DJANGO_SECURE_HSTS_PRELOAD="1",
        DJANGO_SECURE_COOKIES="1",
    )
    assert_clean(done)


def test_check_deploy_names_what_a_plain_setup_lacks() -> None:
    done = manage("check", "--deploy", **PRODUCTION)
    assert done.returncode == 0  # warnings, not errors
    for check in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert check in done.stderr


def test_debug_off_without_a_secret_key_stops_with_one_sentence() -> None:
    done = manage("check", DJANGO_SETTINGS_MODULE="config.settings")
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # no traceback
    assert done.stderr.startswith("missive: DJANGO_SECRET_KEY is not set and DJANGO_DEBUG is off")
    assert done.stderr.count(". ") == 0  # one sentence


def test_a_setting_that_is_not_a_number_stops_with_one_line_naming_it() -> None:
    for name, value, noun in (
        ("BULK_BATCH_SIZE", "4k", "a whole number"),
        ("UNREAD_REPAIRS_PUT_OFF_S", "thirty", "a number"),
        ("STORE_TIMEOUT_REDIS_API_S", "-1", "a number"),
        ("BREAKER_RESET_S", "nan", "a number"),
    ):
        done = manage("check", **PRODUCTION, **{name: value})
        assert done.returncode != 0, name
        assert done.stderr.strip().splitlines() == [
            f"missive: {name} must be {noun} of 0 or more, not {value!r}"
        ]
    assert_clean(manage("check", **PRODUCTION, BULK_BATCH_SIZE="4000"))  # a number is taken


def test_the_api_server_without_a_secret_key_stops_once_with_that_sentence() -> None:
    """gunicorn's arbiter shuts down (it does not start worker after worker that stop alike)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")}
    gunicorn = str(Path(sys.executable).parent / "gunicorn")
    server = ["config.asgi:application", "-k", "uvicorn_worker.UvicornWorker", "-w", "1"]
    done = subprocess.run(
        [gunicorn, *server, "-b", "127.0.0.1:0"],
        cwd=ROOT,
        env={**base, "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4  # gunicorn's "App failed to load"
    assert "missive: DJANGO_SECRET_KEY is not set" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.count("missive: DJANGO_SECRET_KEY") == 1  # one worker tried, then it stopped


def test_the_one_machine_mode_keeps_a_random_key_of_its_own(tmp_path: Path) -> None:
    env = {"DJANGO_SETTINGS_MODULE": "config.settings", "MISSIVE_VAR_DIR": str(tmp_path)}
    env["REDIS_URL"] = ""  # the embedded Redis: the demo's mode
    show = "from django.conf import settings; print(settings.SECRET_KEY)"
    first = manage("shell", "-c", show, **env)
    assert first.returncode == 0, first.stderr
    again = manage("shell", "-c", show, **env)
    key = (tmp_path / "secret_key").read_text().strip()
    shown = [done.stdout.strip().splitlines()[-1] for done in (first, again)]
    assert shown == [key, key]
    assert len(key) >= 50
    assert (tmp_path / "secret_key").stat().st_mode & 0o077 == 0


def test_a_celery_worker_with_the_api_role_stops_with_one_sentence() -> None:
    """MISSIVE_PROCESS_ROLE=api (say, from an environment file shared with the API's unit) would
    give a worker the API's timeouts and sends that give up at once: it refuses to start."""
    cmd = [sys.executable, "-m", "celery", "-A", "config", "worker", "-Q", "test.role", "-c", "1"]
    done = subprocess.run(
        cmd,
        cwd=ROOT,
        env={**os.environ, "MISSIVE_PROCESS_ROLE": "api"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "MISSIVE_PROCESS_ROLE=api is for API processes" in done.stderr + done.stdout
