"""WSGI entry point (gunicorn config.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

from infra.heap import freeze_startup_heap

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("MISSIVE_PROCESS_ROLE", "api")  # API timeouts (config/settings.py)
application = get_wsgi_application()
freeze_startup_heap()  # full GC passes skip the start-up heap (infra/heap.py)
