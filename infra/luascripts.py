"""A per-app registry of Lua scripts kept as ``.lua`` files beside the code that calls them.

On a Redis Cluster a script touches one slot, so a call that spans users is one call per slot
(``infra.redis.by_user_slot``): a 1,000-recipient batch falls into ~1,000 slots and cost ~1,000
script calls, which halved fan-out against one Redis (0.50, ``scripts/bench_scaleout.py``).
``call_by_slot`` runs the same per-slot script for all the slots one primary serves in ONE call
(Redis 7's ``allow-cross-slot-keys`` script flag; ``lua/_per_node.lua`` wraps the script's text
unchanged), so a batch costs one call per primary; a group whose slot the node does not serve
(a stale slot map, a slot moving) raises there on its first key, is answered ``false`` and is sent
again on its own. Each group keeps its own keys (its own exactly-once marker included), so a group
gives the same result whichever way it ran. The contract for a script run this way: it reads
every key it writes before its first write, so a group that raises has written nothing
(``tests/infra/test_redis_cluster.py``: a half-migrated slot).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from redis.commands.core import Script

from infra.redis import clustered, get_redis, node_slots

PER_NODE = (Path(__file__).parent / "lua" / "_per_node.lua").read_text()
PER_NODE_READ = (Path(__file__).parent / "lua" / "_per_node_read.lua").read_text()
SHEBANG = "#!lua flags=allow-cross-slot-keys\n"
SHEBANG_READ = "#!lua flags=allow-cross-slot-keys,no-writes\n"
INCLUDE = re.compile(r"^--#include (\S+)$", re.MULTILINE)


class ScriptRegistry:
    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def source(self, name: str) -> str:
        """The script's text, each ``--#include <file>`` line replaced by that file of the same
        folder (Redis scripts cannot load one another: a function two scripts share is kept
        once)."""
        text = (self.folder / f"{name}.lua").read_text()
        return INCLUDE.sub(lambda m: (self.folder / m.group(1)).read_text(), text)

    @cache  # noqa: B019 - one registry per app, alive for the whole process
    def script(self, name: str) -> Script:
        return get_redis().register_script(self.source(name))

    @cache  # noqa: B019 - as above
    def per_node_script(self, name: str) -> Script:
        """Script ``name`` as the function ``body(KEYS, ARGV)`` under the per-node driver."""
        wrapped = f"{SHEBANG}local function body(KEYS, ARGV)\n{self.source(name)}\nend\n{PER_NODE}"
        return get_redis().register_script(wrapped)

    @cache  # noqa: B019 - as above
    def per_node_read_script(self, name: str) -> Script:
        """Read-only script ``name`` as ``body(KEYS, ARGV)`` under the merged per-node driver."""
        wrapped = f"{SHEBANG_READ}local function body(KEYS, ARGV)\n{self.source(name)}\nend\n"
        return get_redis().register_script(wrapped + PER_NODE_READ)

    def call(self, name: str, keys: Sequence[Any], args: Sequence[Any], client: Any = None) -> Any:
        """Run script ``name``; ``client`` may be a pipeline to batch it with other commands."""
        return self.script(name)(keys=list(keys), args=list(args), client=client)

    def call_by_slot(
        self, name: str, groups: Mapping[int, Sequence[Any]], args: Sequence[Any]
    ) -> dict[int, Any]:
        """Run script ``name`` once per slot group (``{slot: its keys}``, every key of a group in
        that slot) with the same ``args``: on a cluster one call per primary, in one pipeline;
        returns each slot's reply. On one Redis, one call per group."""
        if not clustered():
            pipe = get_redis().pipeline(transaction=False)
            for group in groups.values():
                self.call(name, group, args, client=pipe)
            return dict(zip(groups, pipe.execute(), strict=True))
        replies = self._per_node(name, groups, args)
        missed = [slot for slot in groups if replies.get(slot) is None]
        if missed:  # not served where the slot map said: one call each, redirects followed
            pipe = get_redis().pipeline(transaction=False)
            for slot in missed:
                self.call(name, groups[slot], args, client=pipe)
            replies.update(zip(missed, pipe.execute(), strict=True))
        return replies

    def read_by_node(
        self, name: str, groups: Mapping[int, Sequence[Any]], args: Sequence[Any]
    ) -> list[tuple[list[int], Any]]:
        """Run READ-ONLY script ``name`` over the slot groups ``groups``: on a cluster once per
        primary over the keys of all its slots, as one group (``lua/_per_node_read.lua``).
        Returns units ``(slots, reply)``, each reply over those slots' keys concatenated in that
        order; a node that refuses (a slot moved or moving) gives one unit per slot instead
        (``call_by_slot``). On one Redis, one call over every key.

        For a script whose reply follows its keys (positions of owners) and whose commands each
        touch one key (Redis refuses a command whose keys span slots, even here), a merged call
        runs its body once per node instead of once per slot. A fan-out batch in slot order
        spans ~1,000 slots: its per-slot groups cost the primaries ~3.5 µs per recipient over a
        batch in 3 slots, across its three calls; the cache probe, merged, cost as much in the
        planner's wave as at 3 slots a batch (1.67 against 1.60 µs per recipient,
        ``scripts/bench_slots.py`` layouts, one run)."""
        if not clustered():
            every = [key for group in groups.values() for key in group]
            return [(list(groups), self.call(name, every, args))]
        plan = node_slots(groups)
        pipe = get_redis().pipeline(transaction=False)
        for slots in plan:
            every = [key for slot in slots for key in groups[slot]]
            argv: list[Any] = [len(args), *args, *every]
            self.per_node_read_script(name)(keys=[every[0]], args=argv, client=pipe)
        units: list[tuple[list[int], Any]] = []
        for slots, reply in zip(plan, pipe.execute(), strict=True):
            if reply is not None:
                units.append((slots, reply))
                continue
            alone = self.call_by_slot(name, {slot: groups[slot] for slot in slots}, args)
            units += [([slot], alone[slot]) for slot in slots]
        return units

    def _per_node(
        self, name: str, groups: Mapping[int, Sequence[Any]], args: Sequence[Any]
    ) -> dict[int, Any]:
        plan = node_slots(groups)
        pipe = get_redis().pipeline(transaction=False)
        for slots in plan:
            argv: list[Any] = [len(args), *args]
            for slot in slots:
                argv += [len(groups[slot]), *groups[slot]]
            self.per_node_script(name)(keys=[groups[slots[0]][0]], args=argv, client=pipe)
        replies: dict[int, Any] = {}
        for slots, reply in zip(plan, pipe.execute(), strict=True):
            replies.update(zip(slots, reply, strict=True))
        return replies


# Scripts of the platform itself (``config/lua``): the token bucket behind channel rates
# (bulk.quotas) and API clients' write rates (api.throttles).
platform = ScriptRegistry(Path(__file__).parent / "lua")


def take_tokens(key: str, *, rate_per_s: float, capacity: float, want: int, now_ms: int) -> int:
    """Take ``want`` tokens from the bucket at ``key``: 0 when taken, else ms until there are."""
    return int(platform.call("token_bucket", [key], [rate_per_s, capacity, want, now_ms]))
