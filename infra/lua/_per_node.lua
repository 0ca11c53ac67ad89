-- The driver that runs a per-slot script (the function ``body`` above, the script's own text
-- unchanged) for the groups of several slots in ONE call on the node that serves them (Redis 7
-- script flag ``allow-cross-slot-keys``, on the shebang line this driver's caller puts first).
-- KEYS[1]: a key of the first group (it routes the call to that group's node; not used here).
-- ARGV[1]: how many arguments the per-slot script takes, those arguments (the same for every
-- group), then per group: how many keys, the keys.
-- A group is run only when every one of its keys is served here (one pcall'd EXISTS of all of
-- them, one slot, before anything is written: a slot that moved, or is migrating with some of
-- them already gone, answers an error instead). Reply: per group the per-slot script's reply, or false (nil) for a
-- group not served here, which the caller sends again on its own (infra.luascripts.call_by_slot).
local function served(keys)
  local found = redis.pcall('EXISTS', unpack(keys))
  return not (type(found) == 'table' and found.err)
end

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
  if served(keys) then
    local reply = body(keys, args)
    if reply == nil then reply = {} end
    out[#out + 1] = reply
  else
    out[#out + 1] = false
  end
end
return out
