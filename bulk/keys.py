"""Redis key formats of the bulk app.

quota:{q:<sender>}:<period>:r<n>       hash receiver -> messages this period, for the receivers
                                       with uid // QUOTA_SPAN == n: no hash holds more than
                                       QUOTA_SPAN fields, and a batch (its receivers in uid
                                       order) touches few of them (``quota_bucket``).
budget:{q:<sender>}:<yyyymmdd>         the sender's recipients used today on the daily channel.
quota:{q:<sender>}:done:<c>:<b>        the stored outcome of batch b of campaign c: a redelivered
                                       batch gets the same answer and consumes nothing twice.
bucket:{ch:<channel>}                  token bucket of a channel (tokens, last refill ms).
bucket:{ch:<channel>}:active           sorted set: campaigns that asked the channel for tokens ->
                                       last ask (ms); those of the last FAIR_WINDOW_MS share it.
bucket:{ch:<channel>}:c:<campaign>     the campaign's own bucket: rate / active campaigns.
profile:{c:<campaign>}                 hash stage -> microseconds summed over the campaign's
                                       batches, plus _batches and _recipients (BULK_PROFILE).
recalled:{c:<campaign>}                set of the indexes of the batches recalled (bulk/recall.py).
refreshing:{c:<campaign>}              set of the ids of the batches whose refresh is not done yet
                                       (a message changed in SQL, bulk/recall.py).
refresh:pending                        sorted set: campaigns with refreshes under way -> when
                                       they were last enqueued (the sweep re-sends late ones).
adminlaunch:<form key>                 held while the admin's creation form launches a campaign
                                       under that key (bulk/admin_views.py): a double submit
                                       creates one campaign.
The ``{q:<sender>}`` tag keeps one sender's quota keys in one Cluster slot, so the batch's single
Lua call stays legal on Redis Cluster.
"""

from __future__ import annotations

QUOTA_SPAN = 4096


def quota_bucket(receiver: int) -> int:
    """The quota hash a receiver's count is kept in: receivers by uid range, so the receivers of
    one batch (a slice of the audience in uid order) share a few hashes. Spread by ``uid % 4096``
    before, a batch of 4,000 touched ~4,000 hashes: one more key to find in Redis's keyspace and
    one more EXPIRE per receiver. ``scripts/bench_admit.py`` (20M-key Redis, batches of 4,000,
    cap 1): Redis's CPU per receiver 14.8 -> 5.4 us (consecutive uids), 12.0 -> 5.4 (every 50th
    uid), 5.1 -> 2.5 (a second campaign, everyone capped); 56 bytes per receiver for 10M
    consecutive uids, against 61.5 before."""
    return receiver // QUOTA_SPAN


def quota(sender: int, period: int, bucket: int) -> str:
    return f"quota:{{q:{sender}}}:{period}:r{bucket}"


def budget(sender: int, day: str) -> str:
    return f"budget:{{q:{sender}}}:{day}"


def batch_outcome(sender: int, campaign_id: int, index: int) -> str:
    return f"quota:{{q:{sender}}}:done:{campaign_id}:{index}"


def token_bucket(channel: str) -> str:
    return f"bucket:{{ch:{channel}}}"


def channel_active(channel: str) -> str:
    return f"{token_bucket(channel)}:active"


def campaign_bucket(channel: str, campaign: int) -> str:
    return f"{token_bucket(channel)}:c:{campaign}"


def batch_profile(campaign_id: int) -> str:
    return f"profile:{{c:{campaign_id}}}"


def recalled_batches(campaign_id: int) -> str:
    return f"recalled:{{c:{campaign_id}}}"


def refreshing_batches(campaign_id: int) -> str:
    return f"refreshing:{{c:{campaign_id}}}"


def refreshes_pending() -> str:
    return "refresh:pending"


def recall_resend_due() -> str:
    """Held RESEND_EVERY_S by the sweep that re-sends unfinished recalls (bulk/recall.py)."""
    return "recall:resend"


def admin_launch(form_key: str) -> str:
    return f"adminlaunch:{form_key}"
