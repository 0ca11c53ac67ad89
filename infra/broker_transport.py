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
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis, virtual

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


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel
