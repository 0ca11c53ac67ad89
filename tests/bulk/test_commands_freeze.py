"""The operator's commands through a frozen MariaDB (``scripts/services freeze``: SIGSTOP, its
connections stay open and nothing answers), each in a process of its own as an operator runs it.

- ``campaign_watch`` waits the freeze out, whether it meets it mid-way or starts during it: one
  line says a store is not answering, one that it answers again, and the watch ends with the
  campaign's summary (exit 0), not a traceback.
- A command that meets the freeze mid-way (``campaign_send`` streaming a ``--uids-file``) ends
  with ONE line on stderr naming the store and exit status 75, not a traceback, and leaves
  nothing half-stored: the upload is one transaction.
- A command's or a Celery task's statements run on the connection Django made while it loaded
  the models. Once MariaDB's circuit breaker has counted its no-answers, they fail at once as an
  outage ("circuit breaker is open"), as the API's do, instead of each waiting its timeout.

Both processes have the worker's MariaDB timeout cut to 1 s (STORE_TIMEOUT_MARIADB_WORKER_S) so
that a few seconds' freeze holds several of their statements.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from io import StringIO
from typing import Any

import pytest
from django.conf import settings
from django.core.management import call_command

from bulk.models import Audience, Campaign, CampaignStatus
from tests.bulk.helpers import drive, follow, shop
from tests.conftest import ROOT, services, worker_env

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]
Uids = Callable[[int], list[int]]
SHORT = {"STORE_TIMEOUT_MARIADB_WORKER_S": "1"}


@contextmanager
def frozen(name: str) -> Iterator[None]:
    services("freeze", name)
    try:
        yield
    finally:
        services("thaw", name)


def process(*args: str, stderr: int = subprocess.STDOUT) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, *args],
        cwd=ROOT,
        env={**worker_env(settings.DATABASES["default"]["NAME"]), **SHORT},  # the test database
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def open_writer(fifo: str, reader: subprocess.Popen[str], timeout: float = 60.0) -> int:
    """The FIFO's writing end, once ``reader`` has opened it for reading (fails if it exited)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert reader.poll() is None, reader.communicate()
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO:  # ENXIO: nobody reads it yet
                raise
        time.sleep(0.05)
    raise AssertionError(f"nobody opened {fifo} within {timeout}s")


def test_campaign_watch_waits_out_a_frozen_mariadb_and_ends_with_the_summary(
    uids: Uids,
) -> None:
    sender, *fans = uids(3)
    shop(sender)
    follow(sender, fans)
    out = StringIO()
    call_command("campaign_send", "--sender", str(sender), "--text", "x", "--followers", stdout=out)
    campaign = Campaign.objects.get(sender_uid=sender)
    watch = process("manage.py", "campaign_watch", str(campaign.pk), "--interval", "0.2")
    assert watch.stdout is not None
    first = watch.stdout.readline()  # into a pipe: a plain line of progress at the first poll
    assert first.startswith(f"Campaign {campaign.pk} running: "), first
    with frozen("mariadb"):
        time.sleep(4.0)  # polls time out (1 s), then fail at once on the open breaker
    finished = drive(campaign.pk)  # the stores answer: the campaign runs to its end
    rest, _ = watch.communicate(timeout=60)
    output = first + rest
    print(output)

    assert finished.status == CampaignStatus.FINISHED
    assert watch.returncode == 0, output
    assert "Traceback" not in output
    assert f"Campaign {campaign.pk}: a store is not answering" in rest  # met mid-way
    assert f"Campaign {campaign.pk}: the stores answer again." in output
    assert output.rstrip().endswith(
        f"Campaign {campaign.pk} finished: 2 delivered of 2; skipped 0 quota, 0 blocked, "
        "0 invalid, 0 duplicate; 0 failed."
    )


def test_campaign_watch_started_during_the_freeze_waits_it_out(uids: Uids) -> None:
    """Django's start-up checks would have ended this watch with a SystemCheckError (the
    primary "cannot connect"); it waits instead, as it does mid-way."""
    sender, fan = uids(2)
    shop(sender)
    call_command("campaign_send", "--sender", str(sender), "--text", "x", "--uids", str(fan))
    campaign = Campaign.objects.get(sender_uid=sender)
    with frozen("mariadb"):
        watch = process("manage.py", "campaign_watch", str(campaign.pk), "--interval", "0.2")
        time.sleep(5.0)  # the process starts, then its polls time out (1 s) or fail at once
        assert watch.poll() is None, watch.communicate()  # still watching
    finished = drive(campaign.pk)
    output, _ = watch.communicate(timeout=60)
    print(output)

    assert finished.status == CampaignStatus.FINISHED
    assert watch.returncode == 0, output
    assert output.startswith(f"Campaign {campaign.pk}: a store is not answering"), output
    assert f"Campaign {campaign.pk}: the stores answer again." in output
    assert output.rstrip().endswith(
        f"Campaign {campaign.pk} finished: 1 delivered of 1; "
        "skipped 0 quota, 0 blocked, 0 invalid, 0 duplicate; 0 failed."
    )


STATEMENTS = textwrap.dedent(
    """
    import sys, time
    import django
    django.setup()
    from django.db import DatabaseError
    from messaging.models import Account
    Account.objects.exists()  # on the connection made while the models loaded
    print("connected", flush=True)
    sys.stdin.readline()  # MariaDB is frozen now
    for _ in range(4):
        began = time.monotonic()
        try:
            Account.objects.exists()
            outcome = "answered"
        except DatabaseError as exc:
            outcome = str(exc)
        print(f"{time.monotonic() - began:.2f}s {outcome}", flush=True)
    """
)


def test_a_commands_statements_fail_at_once_once_the_breaker_opens() -> None:
    command = process("-c", STATEMENTS)
    assert command.stdout is not None
    assert command.stdin is not None
    assert command.stdout.readline().strip() == "connected"
    with frozen("mariadb"):
        command.stdin.write("\n")
        command.stdin.flush()
        output, _ = command.communicate(timeout=60)
    print(output)
    outcomes = output.strip().splitlines()

    assert command.returncode == 0, output
    assert len(outcomes) == 4, output
    assert "circuit breaker is open" not in outcomes[0]
    assert all("circuit breaker is open" in line for line in outcomes[2:]), output


def test_a_command_that_meets_a_frozen_mariadb_exits_75_with_one_line(
    uids: Uids, tmp_path: Any
) -> None:
    sender, *fans = uids(3)
    shop(sender)
    fifo = str(tmp_path / "uids.txt")
    os.mkfifo(fifo)
    command = process(
        "manage.py", "campaign_send", "--sender", str(sender), "--text", "x", "--uids-file", fifo,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    writer = open_writer(fifo, command)  # the command is past its checks, reading the file
    with frozen("mariadb"):
        os.write(writer, "".join(f"{u}\n" for u in fans).encode())
        os.close(writer)
        began = time.monotonic()
        output, errors = command.communicate(timeout=60)
        took = time.monotonic() - began
    print(output, errors, f"{took:.1f}s")

    assert command.returncode == 75, (output, errors)
    assert "Traceback" not in errors
    lines = errors.strip().splitlines()
    assert len(lines) == 1, errors
    assert lines[0].startswith("campaign_send: stopped because the database did not answer (")
    assert lines[0].endswith("run it again once the store answers.")
    assert not Audience.objects.filter(sender_uid=sender).exists()  # the upload: all or nothing
    assert not Campaign.objects.filter(sender_uid=sender).exists()
