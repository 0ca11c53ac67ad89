"""The binlog follower on real MariaDB, Redis and HBase: rows changed with plain SQL, behind the
application's back, show in the API's answers within a second.

Each test runs ``Follower`` (what ``manage.py cache_follow`` runs) in a thread of its own with a
server_id of its own, on the test database; the changes are committed (transactional tests), as
the binlog holds only committed transactions.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import MySQLdb
import pytest
from django.db import connection
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from cachesync import lag, position, rows
from cachesync.binlog import Follower
from infra.redis import get_redis
from messaging.services import conversations_refresh
from storage.convcache import build, codec, hbase_tier, held, mysql_tier, redis_tier
from storage.convcache import keys as cache_keys
from storage.msgkey import next_msgkeys
from tests.api.factories import Api, inbox_api, send_api
from tests.conftest import Workers, manage, wait_for, worker_env
from tests.groups.helpers import GroupsApi, users_api
from tests.retention.helpers import campaign

pytestmark = pytest.mark.django_db(transaction=True)
FOLLOWS_WITHIN_S = 1.0


class Running:
    """A follower in a thread; ``start`` again after ``stop`` resumes from the saved GTID."""

    def __init__(self) -> None:
        self.server_id = random.randrange(10_000, 4_000_000_000)
        self.follower: Follower | None = None
        self.thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    def start(self) -> Follower:
        follower = Follower(server_id=self.server_id, stop=threading.Event())
        self.follower, self.thread = follower, threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert follower.started.wait(5), "the follower did not start"
        return follower

    def _run(self) -> None:
        assert self.follower is not None
        try:
            self.follower.run()
        except BaseException as exc:  # the test reads it
            self.errors.append(exc)

    def stop(self) -> None:
        if self.follower is not None and self.thread is not None:
            self.follower.stop.set()
            self.thread.join(10)
            assert not self.thread.is_alive(), "the follower did not stop"
        assert not self.errors, self.errors

    def caught_up(self) -> bool:
        assert self.follower is not None
        now = position.Gtids.parse(position.primary_now()).by_domain
        mine = self.follower.applied.by_domain
        return all(d in mine and _seq(mine[d]) >= _seq(g) for d, g in now.items())


def _seq(gtid: str) -> int:
    return int(gtid.rsplit("-", 1)[1])


@pytest.fixture
def follow() -> Iterator[Running]:
    running = Running()
    running.start()
    yield running
    running.stop()


def sql(statement: str, *params: Any) -> int:
    """One statement from a client of its own, as a DBA types it (not the application's
    connection: its statements are marked, infra/statements.py), committed at once."""
    return dba((statement, params))[0]


def dba(*statements: tuple[str, Sequence[Any]]) -> list[int]:
    """``statements`` in one transaction from a client of its own; the rows each changed."""
    db = connection.settings_dict
    conn = MySQLdb.connect(
        host=db["HOST"] or "127.0.0.1",
        port=int(db["PORT"] or 3306),
        user=db["USER"],
        passwd=db["PASSWORD"],
        db=db["NAME"],
        charset="utf8mb4",
    )
    try:
        changed = []
        with conn.cursor() as cur:
            for statement, params in statements:
                cur.execute(statement, tuple(params) or None)
                changed.append(int(cur.rowcount))
        conn.commit()
        return changed
    finally:
        conn.close()


def direct(bff: Api, owner: int) -> dict[int, dict[str, Any]]:
    page = bff.conversations(owner)["results"]
    return {int(c["peer_uid"]): c for c in page if c["kind"] == "direct"}


def follows(check: Callable[[], Any]) -> None:
    wait_for(check, timeout=FOLLOWS_WITHIN_S, every=0.02)


def cached(owner: int) -> bool:
    """Both tiers hold the owner's list (Redis filled, the HBase row built)."""
    in_redis = get_redis().exists(cache_keys.cache_keys(owner)[0])
    return bool(in_redis) and hbase_tier.read(owner).fill is not None


def in_hbase(owner: int, peer: int) -> Any:
    fill = hbase_tier.read(owner).fill
    assert fill is not None
    return next(p.summary() for p in fill.entries if p.peer == peer)


def test_a_conversation_changed_in_sql_shows_in_the_list_from_both_tiers(
    follow: Running, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    sender.sent(alice, bob, "hello")
    assert direct(bff, bob)[alice]["pinned"] is False
    # the list cached in both tiers before the SQL change, built here: the read's own background
    # fill is dropped while the fill pool is busy with an earlier test's
    wait_for(lambda: build.rebuild(bob, redis_too=True) and cached(bob), timeout=20, every=0.5)

    changed = sql(
        "UPDATE messaging_conversation SET pinned = 1 WHERE owner_uid = %s AND peer_uid = %s",
        bob,
        alice,
    )  # no mtime: the follower bumps it, as the application does
    assert changed == 1
    follows(lambda: direct(bff, bob)[alice]["pinned"] is True)

    assert in_hbase(bob, alice).pinned is True
    get_redis().delete(*cache_keys.cache_keys(bob))  # the next read comes from HBase
    assert direct(bff, bob)[alice]["pinned"] is True


def test_a_message_recalled_or_edited_in_sql_shows_in_the_list_and_history(
    follow: Running, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    first = sender.sent(alice, bob, "first")
    last = sender.sent(alice, bob, "a typo")
    assert direct(bff, bob)[alice]["last_message"]["preview"] == "a typo"

    body = json.dumps({"type": "text", "text": "fixed"})
    sql("UPDATE messaging_message SET body = %s WHERE msgkey = %s", body, int(last))
    follows(lambda: direct(bff, bob)[alice]["last_message"]["preview"] == "fixed")
    follows(lambda: direct(bff, alice)[bob]["last_message"]["preview"] == "fixed")

    sql("UPDATE messaging_message SET status = 1 WHERE msgkey = %s", int(last))
    follows(lambda: direct(bff, bob)[alice]["last_message"]["preview"] == "[recalled]")
    history = {m["msgkey"]: m["status"] for m in bff.history(bob, alice)["results"]}
    assert history == {last: "recalled", first: "normal"}


def test_a_message_recalled_in_sql_is_taken_back_as_the_application_takes_it(
    follow: Running, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    """Its unread copy is counted down and flagged, as a recall through the API does; a recall
    the application made is left to the application (the follower finishes none of it)."""
    alice, bob = pair
    sender.sent(alice, bob, "one")
    oops = sender.sent(alice, bob, "oops")
    assert bff.unread(bob)["total"] == 2

    sql("UPDATE messaging_message SET status = 1 WHERE msgkey = %s", int(oops))
    follows(lambda: bff.unread(bob)["total"] == 1)
    assert direct(bff, bob)[alice]["unread"] == 1
    assert direct(bff, bob)[alice]["last_message"]["preview"] == "[recalled]"
    history = {m["msgkey"]: m["status"] for m in bff.history(bob, alice)["results"]}
    assert history[oops] == "recalled"
    wait_for(follow.caught_up, timeout=5)
    assert follow.follower is not None
    assert follow.follower.progress.recalls == 1

    again = sender.sent(alice, bob, "again")
    assert sender.recall(again)[0] == 200  # the application's own recall
    assert bff.unread(bob)["total"] == 1
    wait_for(follow.caught_up, timeout=5)
    assert follow.follower.progress.recalls == 1
    assert bff.unread(bob)["total"] == 1


def test_a_campaigns_message_edited_or_recalled_in_sql_reaches_every_recipient(
    follow: Running, uids: Callable[[int], list[int]], bff: Api, workers: Workers
) -> None:
    """Through the campaign's ledger, as a recall through the API: an edit shows in every
    recipient's conversation list, a recall takes every copy back and out of unread."""
    shop, *readers = uids(4)
    sent = campaign(shop, readers, days_ago=0, text="sale at shop.exmaple")
    workers.start(queues="messaging")
    for reader in readers:
        assert direct(bff, reader)[shop]["last_message"]["preview"] == "sale at shop.exmaple"
        assert bff.unread(reader)["total"] == 1

    def shows(text: str) -> Callable[[], bool]:
        return lambda: all(direct(bff, r)[shop]["last_message"]["preview"] == text for r in readers)

    body = json.dumps({"type": "text", "text": "sale at shop.example"})
    sql("UPDATE messaging_message SET body = %s WHERE msgkey = %s", body, sent.msgkey)
    wait_for(shows("sale at shop.example"), timeout=5, every=0.02)  # a worker's round trip more

    sql("UPDATE messaging_message SET status = 1 WHERE msgkey = %s", sent.msgkey)
    wait_for(shows("[recalled]"), timeout=5, every=0.02)  # a batch counts down, flags, then bumps
    for reader in readers:
        assert bff.unread(reader)["total"] == 0
        history = bff.history(reader, shop)["results"]
        assert [m["status"] for m in history] == ["recalled"]


def test_a_group_message_edited_or_recalled_in_sql_shows_in_every_members_list(
    follow: Running, uids: Callable[[int], list[int]]
) -> None:
    """The group's head follows an edit of its last message; a recall set in SQL is the group's
    recall: out of every member's unread, "[recalled]" in their lists."""
    groups = users_api()
    owner, sender, reader = uids(3)
    gid = groups.created(owner, [sender, reader])
    groups.sent(gid, sender, "see you at 9")
    last = groups.sent(gid, sender, "see you at 10")
    assert groups.group_of(reader, gid)["unread"] == 2

    body = json.dumps({"type": "text", "text": "see you at 11"})
    sql("UPDATE messaging_message SET body = %s WHERE msgkey = %s", body, int(last["msgkey"]))
    follows(lambda: all(preview_of(groups, m, gid) == "see you at 11" for m in (owner, reader)))

    sql("UPDATE messaging_message SET status = 1 WHERE msgkey = %s", int(last["msgkey"]))
    follows(lambda: groups.group_of(reader, gid)["unread"] == 1)
    assert preview_of(groups, reader, gid) == "[recalled]"
    assert inbox_api().unread(reader)["total"] == 1
    newest = groups.history(reader, gid)[1]["results"][0]
    assert (newest["status"], newest["content"]) == ("recalled", None)


def preview_of(groups: GroupsApi, uid: int, gid: str) -> Any:
    return groups.group_of(uid, gid)["last_message"]["preview"]


def test_a_conversation_deleted_in_sql_leaves_the_list(
    follow: Running, pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    sender.sent(alice, bob)
    assert alice in direct(bff, bob)
    sql("DELETE FROM messaging_conversation WHERE owner_uid = %s AND peer_uid = %s", bob, alice)
    follows(lambda: alice not in direct(bff, bob))
    assert bob in direct(bff, alice)  # the other side is another row


def test_a_read_position_moved_or_a_conversation_deleted_in_sql_moves_the_unread_counts(
    follow: Running, uids: Callable[[int], list[int]], bff: Api
) -> None:
    """The unread counts follow the rows too: a read position moved in SQL counts its messages
    read, a conversation deleted in SQL stops counting its own (as the application's read and
    delete set them), and the other conversations keep theirs."""
    alice, bob, carol = uids(3)
    sender = send_api("app", [alice, carol])
    sender.sent(alice, bob, "one")
    sender.sent(alice, bob, "two")
    sender.sent(carol, bob, "three")
    assert bff.unread(bob)["total"] == 3

    sql(
        "UPDATE messaging_conversation SET read_upto = last_msgkey"
        " WHERE owner_uid = %s AND peer_uid = %s",
        bob,
        alice,
    )
    follows(lambda: bff.unread(bob)["total"] == 1)
    assert direct(bff, bob)[alice]["unread"] == 0

    sql("DELETE FROM messaging_conversation WHERE owner_uid = %s AND peer_uid = %s", bob, carol)
    follows(lambda: bff.unread(bob)["total"] == 0)
    sender.sent(alice, bob, "four")  # a new message after both: counted once
    assert bff.unread(bob)["total"] == 1


def test_messages_backfilled_or_removed_in_sql_are_counted_and_the_applications_are_not(
    follow: Running, uids: Callable[[int], list[int]], bff: Api
) -> None:
    """A DBA backfills messages with plain SQL (the message, the receiver's inbox row, and the
    conversation row: a new one, or its last message moved on): the receiver's unread counts
    them and the list shows them; an inbox row deleted there stops counting. The application's
    own deliveries count themselves and are never recounted (their statements carry its mark)."""
    alice, bob, carol = uids(3)
    sender = send_api("app", [alice])
    sender.sent(alice, bob, "hello")
    assert bff.unread(bob)["total"] == 1

    first, second = next_msgkeys(2)
    dba(*backfill(first, carol, bob, "from the old system"), conversation_new(bob, carol, first))
    follows(lambda: bff.unread(bob)["total"] == 2)
    assert direct(bff, bob)[carol]["unread"] == 1
    assert direct(bff, bob)[carol]["last_message"]["preview"] == "from the old system"

    moved_on = (
        "UPDATE messaging_conversation SET last_msgkey = %s, sort_key = %s, mtime = mtime + 1"
        " WHERE owner_uid = %s AND peer_uid = %s",
        (second, second, bob, alice),
    )
    dba(*backfill(second, alice, bob, "missed one"), moved_on)
    follows(lambda: bff.unread(bob)["total"] == 3)
    assert direct(bff, bob)[alice]["unread"] == 2

    removed = sql(
        "DELETE FROM messaging_inbox WHERE owner_uid = %s AND peer_uid = %s AND msgkey = %s",
        bob,
        carol,
        first,
    )
    assert removed == 1
    follows(lambda: bff.unread(bob)["total"] == 2)
    assert direct(bff, bob)[carol]["unread"] == 0
    wait_for(follow.caught_up, timeout=5)
    assert follow.follower is not None
    assert follow.follower.progress.backfilled == 3  # bob's two conversations, then carol's again

    sender.sent(alice, bob, "after it all")  # the application's: counted once, not recounted
    assert bff.unread(bob)["total"] == 3
    wait_for(follow.caught_up, timeout=5)
    assert follow.follower.progress.backfilled == 3
    assert bff.unread(bob)["total"] == 3


SHELL_BACKFILL = """
import json, os
from django.db import connection, transaction
with transaction.atomic(), connection.cursor() as cur:
    for statement, params in json.loads(os.environ["BACKFILL"]):
        cur.execute(statement, params)
"""


def test_a_backfill_run_in_manage_py_shell_is_counted_like_a_dbas(
    follow: Running, uids: Callable[[int], list[int]], bff: Api
) -> None:
    """An operator's backfill through Missive's own connection in ``manage.py shell`` (a data
    migration runs the same way): those commands' statements go without the application's mark,
    so the follower counts the backfilled message in the receiver's unread."""
    alice, bob = uids(2)
    (msgkey,) = next_msgkeys(1)
    statements = [*backfill(msgkey, alice, bob, "imported"), conversation_new(bob, alice, msgkey)]
    on_test_database = {
        **worker_env(connection.settings_dict["NAME"]),
        "BACKFILL": json.dumps(statements),
    }
    shell = manage("shell", "-c", SHELL_BACKFILL, **on_test_database)
    assert shell.returncode == 0, shell.stderr

    follows(lambda: bff.unread(bob)["total"] == 1)
    assert direct(bff, bob)[alice]["last_message"]["preview"] == "imported"


def backfill(msgkey: int, sender: int, receiver: int, text: str) -> list[tuple[str, list[Any]]]:
    """A DBA's statements for one old message: its content and the receiver's inbox row."""
    body = json.dumps({"type": "text", "text": text})
    return [
        (
            "INSERT INTO messaging_message (msgkey, sender_uid, type, body, status, created_at)"
            " VALUES (%s, %s, 'text', %s, 0, NOW(6))",
            [msgkey, sender, body],
        ),
        (
            "INSERT INTO messaging_inbox (owner_uid, peer_uid, msgkey, direction, flags)"
            " VALUES (%s, %s, %s, 0, 0)",
            [receiver, sender, msgkey],
        ),
    ]


def conversation_new(owner: int, peer: int, msgkey: int) -> tuple[str, list[Any]]:
    return (
        "INSERT INTO messaging_conversation (owner_uid, peer_uid, category, last_msgkey,"
        " sort_key, read_upto, pinned, muted, mtime) VALUES (%s, %s, 'stranger', %s, %s, 0, 0, 0,"
        " %s)",
        [owner, peer, msgkey, msgkey, int(time.time() * 1000)],
    )


def test_a_restart_resumes_from_the_saved_gtid_and_applies_each_change_once(
    pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    alice, bob = pair
    running = Running()
    first = running.start()
    try:
        sender.sent(alice, bob)
        assert direct(bff, bob)[alice]["muted"] is False
        wait_for(running.caught_up, timeout=5)
    finally:
        running.stop()
    assert position.load() == first.applied.text()

    sql(  # while it is down: the cached list does not follow
        "UPDATE messaging_conversation SET muted = 1, mtime = mtime + 1 "
        "WHERE owner_uid = %s AND peer_uid = %s",
        bob,
        alice,
    )
    assert direct(bff, bob)[alice]["muted"] is False

    again = running.start()
    try:
        follows(lambda: direct(bff, bob)[alice]["muted"] is True)
        wait_for(running.caught_up, timeout=5)
        assert again.progress.applied == 1  # the change made while it was down, once
    finally:
        running.stop()


def test_an_older_version_never_overwrites_a_newer_entry(
    pair: tuple[int, int], sender: Api, bff: Api
) -> None:
    """Replayed late (the follower was down), a deletion's tombstone (old mtime + 1) loses to the
    conversation the application re-created meanwhile."""
    alice, bob = pair
    running = Running()
    running.start()
    try:
        sender.sent(alice, bob, "one")
        wait_for(running.caught_up, timeout=5)
    finally:
        running.stop()

    sql("DELETE FROM messaging_conversation WHERE owner_uid = %s AND peer_uid = %s", bob, alice)
    sender.sent(alice, bob, "two")  # re-created, newer mtime, pushed by the application
    assert direct(bff, bob)[alice]["last_message"]["preview"] == "two"

    again = running.start()
    try:
        wait_for(running.caught_up, timeout=5)
        assert again.progress.applied >= 1  # the deletion, replayed
        assert direct(bff, bob)[alice]["last_message"]["preview"] == "two"
    finally:
        running.stop()


def test_the_lag_is_a_metric(follow: Running, pair: tuple[int, int], sender: Api) -> None:
    alice, bob = pair
    sender.sent(alice, bob)
    wait_for(lambda: lag.read() is not None, timeout=5)
    response = Client().get("/metrics")
    assert response.status_code == 200
    families = text_string_to_metric_families(response.content.decode())
    samples = {s.name: s.value for f in families for s in f.samples}
    assert 0 <= samples["missive_binlog_lag_seconds"] < 5
    assert 0 <= samples["missive_binlog_lag_sample_age_seconds"] < 5


def test_a_batch_the_caches_hold_is_skipped_and_a_row_edited_behind_the_back_is_followed(
    pair: tuple[int, int], uids: Callable[[int], list[int]], bff: Api
) -> None:
    """One transaction changes 22 conversations of one peer (a fan-out's shape). The application
    pushed 20 of them (write-through), one of those into Redis only (a fill from MySQL leaves
    Redis ahead of HBase the same way); nobody pushed the last two. The follower skips the 19
    that both tiers hold and pushes the rest: every tier ends with every change."""
    alice = pair[0]
    owners = uids(22)
    pushed, redis_only, behind = owners[:19], owners[19], owners[20:]
    mtime = int(time.time() * 1000)  # above the HBase builds' timestamp, as every mtime is
    values = ",".join(f"({o}, {alice}, 'stranger', 0, 0, 0, 0, 0, {mtime})" for o in owners)
    running = Running()
    running.start()
    try:  # followed, so the follower saves a position past it
        sql(
            "INSERT INTO messaging_conversation (owner_uid, peer_uid, category, last_msgkey, "
            f"sort_key, read_upto, pinned, muted, mtime) VALUES {values}"
        )
        for owner in owners:
            build.rebuild(owner, redis_too=True)
            assert cached(owner)
        wait_for(running.caught_up, timeout=5)
    finally:
        running.stop()

    sql(  # one transaction, while the follower is down
        "UPDATE messaging_conversation SET pinned = 1, mtime = mtime + 1 "
        f"WHERE peer_uid = %s AND owner_uid IN ({','.join(map(str, owners))})",
        alice,
    )
    conversations_refresh([(o, alice) for o in pushed])  # the application's write-through
    current = mysql_tier.current([(redis_only, alice)])
    generation = redis_tier.probe_bulk([redis_only]).generations[redis_only]
    redis_tier.apply_many({redis_only: (generation, current[redis_only])})
    assert in_hbase(redis_only, alice).pinned is False

    again = running.start()
    try:
        wait_for(running.caught_up, timeout=5)
        assert again.progress.skipped == len(pushed)
    finally:
        running.stop()
    for owner in owners:
        assert in_redis(owner, alice) == mtime + 1, owner
        assert in_hbase(owner, alice).pinned is True, owner
    for owner in behind:
        assert direct(bff, owner)[alice]["pinned"] is True


def in_redis(owner: int, peer: int) -> int:
    """The version of the owner's Redis entry for ``peer``."""
    raw = get_redis().hget(cache_keys.entries(owner), codec.field(peer))
    assert isinstance(raw, bytes)
    return held.version(raw)


def test_rows_are_decoded_as_the_library_decodes_them(pair: tuple[int, int]) -> None:
    """cachesync/rows.py reads the followed tables' rows from the event's bytes; the library
    reads the same events to the same values (inserts, updates, deletes, a NULL-free table and
    one it leaves to the library)."""
    alice, bob = pair
    start = position.primary_now()
    sql(
        "INSERT INTO messaging_conversation (owner_uid, peer_uid, category, last_msgkey, "
        "sort_key, read_upto, pinned, muted, mtime) VALUES "
        f"({bob}, {alice}, 'followed', 7, 7, 0, 0, 0, 5), ({alice}, {bob}, 'stranger', 7, 7, 7, "
        "1, 0, 6)"
    )
    sql(
        "UPDATE messaging_conversation SET muted = 1, category = 'système' WHERE peer_uid = %s", bob
    )
    sql("DELETE FROM messaging_conversation WHERE owner_uid = %s", bob)
    sql(
        "INSERT INTO messaging_block (owner_uid, blocked_uid, created_at) VALUES (%s, %s, NOW())",
        alice,
        bob,
    )
    ours, theirs = read_rows(start, rows.decode), read_rows(start, lambda e: e.rows)
    assert len(ours) == 5  # 2 inserts, 1 update, 1 delete, 1 block
    assert ours == theirs
    assert ours[2]["after_values"]["category"] == "système"


def read_rows(start: str, decode: Callable[[Any], list[Any]]) -> list[Any]:
    db = connection.settings_dict
    stream = BinLogStreamReader(
        connection_settings={
            "host": db["HOST"] or "127.0.0.1",
            "port": int(db["PORT"] or 3306),
            "user": db["USER"],
            "password": db["PASSWORD"],
        },
        server_id=random.randrange(10_000, 4_000_000_000),
        is_mariadb=True,
        auto_position=start,
        blocking=False,
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
        only_schemas=[db["NAME"]],
        only_tables=["messaging_conversation", "messaging_block"],
    )
    try:  # the library adds why a value is None (``none_sources``): rows.py does not
        found = [row for event in stream for row in decode(event)]
    finally:
        stream.close()
    return [{k: v for k, v in row.items() if not k.endswith("none_sources")} for row in found]
