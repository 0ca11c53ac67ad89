"""Operator commands of the messaging app: ``content_partitions`` and ``follows_import``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from messaging.management.commands import follows_import
from messaging.models import Follow, Message
from storage import msgkey, partitions
from storage.partitions import Month
from tests.conftest import manage

Uids = Callable[[int], list[int]]


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


# -- content_partitions ----------------------------------------------------------------------------
def this_month() -> Month:
    return Month.of(datetime.now(UTC))


def partition_names() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT PARTITION_NAME FROM information_schema.PARTITIONS WHERE TABLE_SCHEMA = "
            "DATABASE() AND TABLE_NAME = 'messaging_message' ORDER BY PARTITION_ORDINAL_POSITION"
        )
        return [row[0] for row in cursor.fetchall()]


def bounds() -> dict[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT PARTITION_NAME, PARTITION_DESCRIPTION FROM information_schema.PARTITIONS "
            "WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'messaging_message'"
        )
        return dict(cursor.fetchall())


def partition_holding(key: int) -> str:
    for name in partition_names():
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT COUNT(*) FROM messaging_message PARTITION ({name}) WHERE msgkey = %s",
                [key],
            )
            if cursor.fetchone()[0]:
                return name
    raise AssertionError(f"msgkey {key} is in no partition")


def store_message(key: int) -> None:
    Message.objects.create(
        msgkey=key,
        sender_uid=1,
        type="text",
        body={"type": "text", "text": "x"},
        created_at=msgkey.created_at(key),
    )


@pytest.mark.django_db(transaction=True)  # ALTER TABLE commits: no test transaction around it
def test_the_migration_partitions_content_from_last_month_to_three_ahead() -> None:
    names = partition_names()
    expected = [this_month().plus(n).name for n in range(-1, 4)]

    assert names[-1] == "pmax"
    assert names[names.index(expected[0]) :][: len(expected)] == expected
    assert bounds()[this_month().name] == str(
        msgkey.lower_bound(this_month().plus(1).first_instant)
    )
    assert bounds()["pmax"] == "MAXVALUE"


@pytest.mark.django_db(transaction=True)
def test_content_partitions_adds_the_coming_months_once() -> None:
    before = set(partition_names())

    first = run("content_partitions", "--months", "7")
    second = run("content_partitions", "--months", "7")

    wanted = {this_month().plus(n).name for n in range(8)}
    added = sorted(wanted - before)
    assert wanted <= set(partition_names())
    assert [line.split()[1] for line in first.splitlines() if line.startswith("added")] == added
    assert "nothing to add" in second
    assert not any(line.startswith("added") for line in second.splitlines())
    assert partition_names()[-1] == "pmax"


@pytest.mark.django_db(transaction=True)
def test_a_message_from_a_future_month_lands_in_that_months_partition() -> None:
    run("content_partitions", "--months", "3")
    target = this_month().plus(2)
    mid_month = datetime(target.year, target.month, 15, 12, tzinfo=UTC)
    inside = msgkey.lower_bound(mid_month) | (5 << msgkey.SEQ_BITS) | 9
    last_of_previous = target.plus(-1).bound - 1
    first_of_target = target.plus(-1).bound

    for key in (inside, last_of_previous, first_of_target):
        store_message(key)

    assert partition_holding(inside) == target.name
    assert partition_holding(first_of_target) == target.name
    assert partition_holding(last_of_previous) == target.plus(-1).name
    assert Message.objects.get(msgkey=inside).created_at == msgkey.created_at(inside)


@pytest.mark.django_db(transaction=True)
def test_drop_before_drops_cold_months_only() -> None:
    cold = this_month().plus(-1)
    cold_key = msgkey.lower_bound(cold.first_instant) + 1
    warm_key = msgkey.lower_bound(this_month().first_instant) + 1
    store_message(cold_key)
    store_message(warm_key)

    out = run("content_partitions", "--drop-before", str(this_month()))
    try:
        assert f"dropped {cold.name} ({cold}, 1 messages)" in out
        assert cold.name not in partition_names()
        assert list(Message.objects.values_list("msgkey", flat=True)) == [warm_key]
        assert "nothing to drop" in run("content_partitions", "--drop-before", str(this_month()))
    finally:  # give the partition back to the tests that follow
        if cold.name not in partition_names():
            with connection.cursor() as cursor:
                clause = ", ".join(
                    f"PARTITION {m.name} VALUES LESS THAN ({m.bound})" for m in (cold, this_month())
                )
                cursor.execute(
                    f"ALTER TABLE messaging_message REORGANIZE PARTITION {this_month().name} "
                    f"INTO ({clause})"
                )


@pytest.mark.django_db(transaction=True)
def test_content_partitions_refuses_bad_arguments() -> None:
    with pytest.raises(CommandError, match="not a cold month"):
        run("content_partitions", "--drop-before", str(this_month().plus(1)))
    with pytest.raises(CommandError, match="YYYY-MM"):
        run("content_partitions", "--drop-before", "2026/01")
    with pytest.raises(CommandError, match="between 0 and 120"):
        run("content_partitions", "--months", "500")


def test_content_partitions_on_sqlite_says_it_is_a_mariadb_feature(tmp_path: Path) -> None:
    done = manage("content_partitions", DATABASE_URL=f"sqlite:///{tmp_path / 'one.sqlite3'}")

    assert done.returncode == 0, done.stderr
    assert "MariaDB" in done.stdout
    assert "sqlite" in done.stdout


def test_month_arithmetic_wraps_years() -> None:
    assert Month(2026, 11).plus(3) == Month(2027, 2)
    assert Month(2026, 1).plus(-1) == Month(2025, 12)
    assert Month.parse("2027-02").name == "p202702"
    assert partitions.months_between(Month(2026, 11), Month(2027, 1)) == [
        Month(2026, 11),
        Month(2026, 12),
        Month(2027, 1),
    ]


# -- follows_import --------------------------------------------------------------------------------
def write(tmp_path: Path, text: str | bytes) -> Path:
    path = tmp_path / "follows.csv"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def follows_of(followers: list[int]) -> dict[tuple[int, int], datetime]:
    rows = Follow.objects.filter(follower_uid__in=followers)
    return {(f.follower_uid, f.followee_uid): f.followed_at for f in rows}


@pytest.mark.django_db
def test_follows_import_keeps_good_lines_once_and_reports_bad_ones(
    tmp_path: Path, uids: Uids
) -> None:
    a, b, c, d, star = uids(5)
    earlier = datetime(2024, 5, 1, tzinfo=UTC)
    Follow.objects.create(follower_uid=d, followee_uid=star, followed_at=earlier)
    path = write(
        tmp_path,
        "follower_uid,followee_uid,followed_at\n"
        f"{a},{star},2025-03-04T05:06:07Z\n"  # 2
        f"{b},{star},1700000000\n"  # 3
        f"{a},{star},2025-03-04T05:06:07Z\n"  # 4: a repeat
        f"abc,{star}\n"  # 5: bad
        "\n"
        f"{c},{star}\n"  # 7: no time: now
        f"{c}\n"  # 8: bad
        f"{d},{star},2025-01-01\n"  # 9: already stored: kept as it was
        f"{c},{c}\n"  # 10: bad (self)
        f"{c},{star},yesterday\n"  # 11: bad
        f"{c},{1 << 63}\n"  # 12: bad (out of range)
        f"{c},{a},2025-06-01T10:00:00+02:00\n"  # 13
        f"{c},{a},1,2\n",  # 14: bad
    )

    out = run("follows_import", str(path))

    stored = follows_of([a, b, c, d])
    assert set(stored) == {(a, star), (b, star), (c, star), (d, star), (c, a)}
    assert stored[(a, star)] == datetime(2025, 3, 4, 5, 6, 7, tzinfo=UTC)
    assert stored[(b, star)] == datetime.fromtimestamp(1700000000, tz=UTC)
    assert stored[(c, a)] == datetime(2025, 6, 1, 8, tzinfo=UTC)
    assert stored[(d, star)] == earlier
    assert abs(stored[(c, star)] - timezone.now()).total_seconds() < 3600
    assert "13 lines read (header skipped): 6 good lines stored" in out
    assert "6 bad lines skipped" in out
    assert "line 5: follower_uid 'abc' is not an integer" in out
    assert "line 8: expected 2 or 3 comma-separated fields, found 1" in out
    assert "line 10: a user cannot follow themselves" in out
    assert "line 11: followed_at 'yesterday' is neither ISO-8601 nor unix seconds" in out
    assert "line 12: followee_uid" in out
    assert "and 1 more bad lines" in out


@pytest.mark.django_db
def test_follows_import_streams_a_big_file_in_batches_with_progress(
    tmp_path: Path, uids: Uids, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    star, *fans = uids(12_001)
    lines = "".join(f"{fan},{star},{1700000000 + i}\n" for i, fan in enumerate(fans))
    path = write(tmp_path, lines + "not,a,line\n")
    monkeypatch.setattr(follows_import, "PROGRESS_FROM_BYTES", 0)
    monkeypatch.setattr(follows_import, "BATCH", 5000)

    out = run("follows_import", str(path))

    assert Follow.objects.filter(followee_uid=star).count() == 12_000
    assert "12001 lines read: 12000 good lines stored" in out
    assert "line 12001: follower_uid 'not' is not an integer" in out
    assert capsys.readouterr().out == ""  # progress goes to stderr, never into the report


def test_follows_import_of_a_missing_file_fails_in_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nope.csv"
    with pytest.raises(CommandError, match=r"cannot read .*nope\.csv: No such file or directory"):
        run("follows_import", str(missing))

    done = manage("follows_import", str(missing))
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        f"CommandError: cannot read {missing}: No such file or directory"
    ]


@pytest.mark.django_db
def test_follows_import_survives_binary_junk_and_endless_lines(tmp_path: Path, uids: Uids) -> None:
    a, b, star = uids(3)
    junk = b"\xff\xfe\x00junk\n" + b"7" * 100_000 + b"\n"
    path = write(tmp_path, junk + f"{a},{star}\n{b},{star}".encode())  # no final newline

    out = run("follows_import", str(path))

    assert follows_of([a, b]).keys() == {(a, star), (b, star)}
    assert "4 lines read: 2 good lines stored" in out
    assert "line 1: expected 2 or 3 comma-separated fields, found 1" in out
    assert "line 2: line is longer than 4096 bytes" in out
