"""The gunicorn worker class of the API and gateway processes: ``uvicorn_worker.UvicornWorker``
with the WebSocket settings the gateway's memory needs (gunicorn has no flags for them).

    gunicorn config.asgi:application -k live.gateway_worker.GatewayWorker -w <cores> -b <addr>

- ``ws_per_message_deflate=False``: the permessage-deflate extension keeps a zlib compressor and
  decompressor per connection, ~37 KB of the ~82 KB an idle connection held; live frames are
  small JSON documents that gain little from it. It is an optional extension: clients that offer
  it simply get uncompressed frames.
- ``ws="wsproto"``: the wsproto protocol holds ~2.4 KB less per idle connection than the
  websockets one (uvicorn's default, which keeps the handshake's request and response).

Measured with ``scripts/bench_live.py``, 10,000 idle connections on one process (2026-11-24):
81.8 KB each with uvicorn's defaults, 22.6 KB with deflate off, 20.2 KB with wsproto too (the
consumer's own share cut by ``live.gateway`` and ``live.routing``). The same settings as uvicorn
flags: ``--ws wsproto --ws-per-message-deflate false``.
"""

from typing import Any, ClassVar

from uvicorn_worker import UvicornWorker

GATEWAY_WS: dict[str, Any] = {"ws": "wsproto", "ws_per_message_deflate": False}
GATEWAY_FLAGS = ["--ws", "wsproto", "--ws-per-message-deflate", "false"]


class GatewayWorker(UvicornWorker):
    CONFIG_KWARGS: ClassVar[dict[str, Any]] = {**UvicornWorker.CONFIG_KWARGS, **GATEWAY_WS}
