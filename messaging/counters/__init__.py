"""Unread counters: the live count per user, per category and per conversation, in Redis.

A store the delivery paths write (``store.py``: every change is one Lua script in ``lua/``, so
a total always equals its parts, and a marker makes each change idempotent) and the read paths
read; ``keys.py`` holds the key format. The truth they are rebuilt from is the inbox plus each
conversation's read position (``rebuild.py``); ``epoch.py`` notices a Redis that restarted (and
so may have come back empty or behind) and repairs each user lazily, on their next read.
"""
