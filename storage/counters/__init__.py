"""Unread counters: the live count per user, per category and per conversation, in Redis.

A store every delivery path writes (``store.py``: every change is one Lua script in ``lua/``, so
a total always equals its parts, and a marker makes each change idempotent) and the read paths
read; ``keys.py`` holds the key format. The counters are ``unread``'s: its rebuild
(``unread/rebuild.py``) recomputes them from messaging's truth (the inbox plus each
conversation's read position), and the unread answer is built from them; ``epoch.py`` notices a
Redis that restarted and has each user repaired lazily, by the rebuild ``unread`` binds to it.
"""
