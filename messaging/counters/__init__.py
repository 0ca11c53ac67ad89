"""Repair of the unread counters (the store: ``storage/counters``) from messaging's truth.

``rebuild.py`` recomputes a user's counters from the inbox plus each conversation's read
position; ``storage/counters/epoch.py`` notices a Redis that restarted (and so may have come back
empty or behind) and, handed ``rebuild.unread_rebuild_user``, repairs each user lazily, on their
next read.
"""
