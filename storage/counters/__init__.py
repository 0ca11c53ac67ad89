"""Unread counters: the live count per user, per category and per conversation, in Redis.

A store every delivery path writes (``store.py``: every change is one Lua script in ``lua/``, so
a total always equals its parts, and a marker makes each change idempotent) and the read paths
read; ``keys.py`` holds the key format. The truth they are rebuilt from (the inbox plus each
conversation's read position) is messaging's: ``messaging/counters/rebuild.py``; ``epoch.py``
notices a Redis that restarted and has each user repaired lazily, by the rebuild its caller
hands in.
The unread answer built from them is ``unread``'s.
"""
