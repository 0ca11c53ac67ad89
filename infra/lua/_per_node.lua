-- The driver that runs a per-slot script (the function ``body`` above, the script's own text
-- unchanged) for the groups of several slots in ONE call on the node that serves them (Redis 7
-- script flag ``allow-cross-slot-keys``, on the shebang line this driver's caller puts first).
-- KEYS[1]: a key of the first group (it routes the call to that group's node; not used here).
-- ARGV[1]: how many arguments the per-slot script takes, those arguments (the same for every
-- group), then per group: how many keys, the keys.
-- Each group runs under pcall. A key this node does not serve (a slot that moved, or is migrating
-- with that key already gone) raises where the script first touches it, and a script run this
-- way reads every key it writes before its first write (read-only ones trivially; incr_many
-- reads its owners and its marker first), so a group that raises has written nothing. Reply:
-- per group the per-slot script's reply, or false (nil) for a group that raised, which the
-- caller sends again on its own (infra.luascripts.call_by_slot): where it belongs after a
-- redirect, or with its error raised to the caller.
-- Before, a pcall'd EXISTS of a group's keys checked this up front: 11% of the primaries'
-- command time in a fan-out batch (scripts/bench_slots.py), one more lookup of every key.
local n_args = tonumber(ARGV[1])
local args = {}
for i = 1, n_args do args[i] = ARGV[1 + i] end
local out = {}
local i = 2 + n_args
while i <= #ARGV do
  local n = tonumber(ARGV[i])
  local keys = {}
  for j = 1, n do keys[j] = ARGV[i + j] end
  i = i + n + 1
  local ok, reply = pcall(body, keys, args)
  if not ok then
    out[#out + 1] = false
  else
    if reply == nil then reply = {} end
    out[#out + 1] = reply
  end
end
return out
