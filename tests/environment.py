"""A pytest plugin loaded before Django's settings (``-p tests.environment`` in pyproject.toml):
a test-only DJANGO_SECRET_KEY in the environment.

With DJANGO_DEBUG off the product refuses to start without DJANGO_SECRET_KEY (infra/deploy.py).
Set here, before the settings load, the servers and workers the tests start (gunicorn, celery,
manage.py) inherit it too.
"""

import os

os.environ.setdefault("DJANGO_SECRET_KEY", "tests-only-" + "k3y" * 20)
