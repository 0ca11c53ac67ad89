"""``manage.py retention_run``: the dry run's JSON report, and bad input as one readable line
with a non-zero exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from io import StringIO

import pytest
from django.core.management import call_command

from tests.conftest import ROOT
from tests.retention.helpers import campaign

pytestmark = pytest.mark.django_db
Uids = Callable[[int], list[int]]


def test_dry_run_json_names_each_kind_and_what_would_go(uids: Uids) -> None:
    shop, fan = uids(2)
    campaign(shop, [fan], days_ago=40)
    out = StringIO()

    call_command("retention_run", "--dry-run", "--json", stdout=out, stderr=StringIO())

    report = json.loads(out.getvalue())
    kinds = {k["kind"]: k for k in report["kinds"]}
    assert report["dry_run"] is True
    assert set(kinds) == {"campaign_inbox", "history", "events", "ledger"}
    assert kinds["campaign_inbox"]["counts"]["entries"] == 1
    assert kinds["history"]["days"] == 0


def run(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "retention_run", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--kind", "inboxes"], {}, "--kind: invalid value 'inboxes'"),
        (
            ["--dry-run"],
            {"RETENTION_HISTORY_DAYS": "-3"},
            "RETENTION_HISTORY_DAYS must be a whole number of 0",
        ),
    ],
)
def test_bad_input_is_one_line_and_a_failed_exit(
    args: list[str], env: dict[str, str], says: str
) -> None:
    done = run(*args, **env)

    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert says in lines[-1]
    assert not any(line.startswith("Traceback") for line in lines), done.stderr
