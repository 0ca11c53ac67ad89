"""ASGI entry point, the production server for the API:

    gunicorn config.asgi:application -k uvicorn_worker.UvicornWorker -w <cores> -b <addr>

``GET /api/v1/users/{uid}/unread`` is answered by ``unread.fastpath`` on the event loop (one
Redis round trip, no SQL, no Django); every other request, and any unread request the fast path
cannot answer completely, goes to Django's ASGI handler, which runs the views (sync code) in a
thread. ``config.wsgi`` still serves the whole app, unread included, for WSGI servers.
WebSocket connections to ``/live/v1`` go to the live gateway (``live.consumers``); any other
WebSocket path is refused.
"""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("MISSIVE_PROCESS_ROLE", "api")  # API timeouts (config/settings.py)
django_application = get_asgi_application()  # sets Django up: import the fast path after it

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from infra.heap import freeze_startup_heap  # noqa: E402
from live.routing import live_first, websocket_urlpatterns  # noqa: E402
from unread.fastpath import UnreadFastPath  # noqa: E402

# The fast path in front; behind it WebSocket connections to /live/v1 go straight to the live
# gateway (live/consumers.py, live/routing.py), HTTP to Django.
routers = ProtocolTypeRouter(
    {"http": django_application, "websocket": URLRouter(websocket_urlpatterns)}
)
application = UnreadFastPath(live_first(routers))
freeze_startup_heap()  # full GC passes skip the start-up heap (infra/heap.py)
