"""The start-up heap kept out of the garbage collector's full passes (``gc.freeze``).

A Django process holds ~113,000 container objects once the app is loaded (settings, models, URL
patterns, serializers, the libraries), and nearly all of them live as long as the process.
CPython's full (generation-2) collection walks every one of them: 50-54 ms on this 2-core machine
under load (``gc.collect(2)`` after ``django.setup()``), run inside whichever request happened to
allocate past the collector's threshold, whose answer waits for it. ``gc.freeze()`` moves what
exists now into a permanent generation that no collection scans: the same full pass then took
0-7 ms (in a fan-out worker 0.4-2.1 ms against 57-163 ms); objects made later are collected as
before. Measured with ``scripts/bench_latency.py``: the slowest of 300 sends fell from 60-114 ms
to 24-55 ms, p50 and p99 unchanged (BENCHMARKS.md, "A 1:1 send's p99 and the garbage
collector").
"""

from __future__ import annotations

import gc


def freeze_startup_heap(*, urls: bool = True) -> None:
    """Collect once and freeze every object alive now. ``urls``: first load what Django would
    load on the first request (the URL conf). Called at the end of the API's entry points
    (config/asgi.py, wsgi.py) and in a Celery worker's main process before it forks its pool
    (config/celery.py), whose children inherit the frozen generation."""
    if urls:
        from django.urls import get_resolver

        get_resolver().url_patterns  # noqa: B018  (a lazy property: this loads every URL module)
    gc.collect()
    gc.freeze()
