"""The API process's start-up heap is frozen out of the garbage collector's full passes
(infra/heap.py): what a full pass walks, inside whichever request triggers it, is only what the
requests have made since. Before, each pass walked the whole start-up heap: 50-110 ms added to
the send that triggered it (BENCHMARKS.md)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

PROBE = (
    "import gc, time\n"
    "import config.asgi\n"
    "began = time.perf_counter(); gc.collect(2)\n"
    "print(gc.get_freeze_count(), len(gc.get_objects(2)), time.perf_counter() - began)\n"
)


def test_the_api_entry_point_leaves_a_full_collection_little_to_walk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=dict(os.environ), capture_output=True,
        text=True, timeout=120, check=True,
    )  # fmt: skip
    frozen, left, took_s = done.stdout.split()
    print(f"frozen {frozen}, left for a full pass {left}, a full pass took {float(took_s):.4f} s")

    assert int(frozen) > 50_000  # settings, models, URL patterns, the libraries
    assert int(left) < int(frozen) // 20
