"""The channel-layer messages between the senders (``live.pusher``) and the gateway processes
(``live.gateway``), on each process's one channel:

``{"type": "live.batch", "items": [{...push..., "group": "<group>"}, ...]}``: one message per
gateway process per sending call; the gateway hands each item to its connections of that group.
Each push carries its log ``epoch`` and ``pos``: a connection drops one at or below the last
position it sent (``live.consumers``), so a message delivered twice shows each frame once.
"""

BATCH = "live.batch"
