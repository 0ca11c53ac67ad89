"""Group chat on read diffusion (DESIGN.md "Group chat: read diffusion", API.md "Groups").

A message is stored once (content, one timeline entry, the group's head in Redis); each member
holds a position, not a copy. models.py (tables), keys.py (Redis keys), timeline/ (the group
timeline backends), state.py (the Redis head and member positions), services.py (writes),
selectors.py (reads), apis.py (HTTP), admin.py.
"""
