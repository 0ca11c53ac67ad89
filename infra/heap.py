"""The start-up heap kept out of the garbage collector's full passes (``gc.freeze``).

A Django process holds ~113,000 container objects once the app is loaded (settings, models, URL
patterns, serializers, the libraries), and nearly all of them live as long as the process.
CPython's full (generation-2) collection walks every one of them: 50-54 ms on this 2-core machine
under load (``gc.collect(2)`` after ``django.setup()``), run inside whichever request happened to
allocate past the collector's threshold, whose answer waits for it. ``gc.freeze()`` moves what
exists now into a permanent generation that no collection scans: the same full pass then takes
under 0.1 ms; objects made later are collected as before. What it changed in a 1:1 send's p99 is
in BENCHMARKS.md ("A 1:1 send's p99 and the garbage collector").
"""

from __future__ import annotations

import gc


def freeze_startup_heap() -> None:
    """Load what Django would load on the first request (the URL conf), collect once, and freeze
    every object alive now. Called at the end of the entry points (config/asgi.py, wsgi.py)."""
    from django.urls import get_resolver

    get_resolver().url_patterns  # noqa: B018  (a lazy property: this loads every URL module)
    gc.collect()
    gc.freeze()
