"""Kombu's Redis transport, with acknowledgements that survive a broker that does not answer.

Celery acknowledges a task (``acks_late``) after it ran. Kombu's Redis transport removes the
message from its ``unacked`` hash and only then frees the worker's prefetch slot; when that
removal times out (a frozen or partitioned broker), Celery logs "Couldn't ack" and goes on, but
the slot stays taken for the life of the channel. A worker of concurrency 2 whose two acks failed
that way never asked the broker for another message: seen in CI, a campaign left with pending
batches for 300 s after a 10-s broker freeze (tests/bulk/test_faults.py), and reproduced by
tests/infra/test_broker_transport.py.

Here the slot is freed whatever the broker said, and an ack that failed is owed: it is sent
again with the next ack or reject. Until then the message stays in ``unacked``; if the worker
stops first, kombu's visibility timeout hands it out once more, which every task tolerates (each
is idempotent). Chosen in settings (``CELERY_BROKER_TRANSPORT``) for ``redis://`` brokers.

In an API process (PROCESS_ROLE ``api``) every command of a channel (its opening ping, a
queue's declaration, a publish) also goes through the broker's circuit breaker
(infra/breakers.py, ``broker``), and one that got no answer (timed out, or the breaker open)
raises ``BrokerNoAnswer``, which kombu does not retry: a request then pays one timeout for a
frozen broker, and none once the breaker is open. A lost connection (a broker restart) is still
retried (config/celery.py). Measured on the production server with Redis frozen:
``POST /campaigns`` answered after 3.0 s (the data Redis's 1 s, then two sends of 1 s each), and
every later one after 2.0 s; the campaign admin pages, whose queue lengths are read through the
same breaker (infra/metrics.py), took 2-3 s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import redis as redis_py
from django.conf import settings
from kombu.exceptions import OperationalError
from kombu.transport import redis, virtual

from infra import breakers, broker
from infra.store_errors import timed_out

T = TypeVar("T")

CONNECTION_ERRORS = redis.get_redis_error_classes()[0]  # what kombu counts as connection losses


class QoS(redis.QoS):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.acks_owed: set[str] = set()

    def ack(self, delivery_tag: str) -> None:
        self._remove([delivery_tag])

    def reject(self, delivery_tag: str, requeue: bool = False) -> None:
        if not requeue:
            self._remove([delivery_tag])
            return
        try:
            self.restore_by_tag(delivery_tag, leftmost=True)
        finally:  # not restored now: the visibility timeout restores it
            virtual.QoS.ack(self, delivery_tag)

    def _remove(self, tags: list[str]) -> None:
        """Remove these tags and every owed one from the broker's indices in one round trip;
        the local slots are freed either way."""
        owed = self.acks_owed | set(tags)
        try:
            with self.pipe_or_acquire() as pipe:
                for tag in owed:
                    pipe.zrem(self.unacked_index_key, tag).hdel(self.unacked_key, tag)
                pipe.execute()
        except CONNECTION_ERRORS:
            self.acks_owed = owed
            raise
        else:
            self.acks_owed -= owed
        finally:
            for tag in tags:
                virtual.QoS.ack(self, tag)


class BrokerNoAnswer(OperationalError):
    """The broker did not answer an API process in time, or its breaker is open: not retried."""


def _in_api(call: Callable[[], T]) -> T:
    """``call()``; in an API process through the broker's breaker, no answer as BrokerNoAnswer."""
    if settings.PROCESS_ROLE != "api":
        return call()
    try:
        return broker.guarded(call)
    except (redis_py.RedisError, OSError) as exc:
        if isinstance(exc, breakers.StoreOpen) or timed_out(exc):
            raise BrokerNoAnswer(f"the broker did not answer: {exc!r}") from exc
        raise


class ApiPipeline(redis_py.client.Pipeline):
    def execute(self, raise_on_error: bool = True) -> list[Any]:
        return _in_api(lambda: super(ApiPipeline, self).execute(raise_on_error))


class ApiClient(redis_py.Redis):
    """An API process's broker client: every command and pipeline through ``_in_api`` (the
    channel's opening ping, a queue's declaration, a publish)."""

    def execute_command(self, *args: Any, **options: Any) -> Any:
        return _in_api(lambda: super(ApiClient, self).execute_command(*args, **options))

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> ApiPipeline:
        return ApiPipeline(self.connection_pool, self.response_callbacks, transaction, shard_hint)


class Channel(redis.Channel):
    QoS = QoS

    def _get_client(self) -> Any:
        if settings.PROCESS_ROLE == "api":
            return ApiClient
        return super()._get_client()  # type: ignore[misc]  # kombu's stubs leave it out


class Transport(redis.Transport):
    Channel = Channel
