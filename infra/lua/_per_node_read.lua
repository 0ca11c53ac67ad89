-- The driver that runs a READ-ONLY per-slot script (the function ``body`` above, its text
-- unchanged) ONCE over the keys of every slot one node serves, as if they were one slot (Redis 7
-- script flags ``allow-cross-slot-keys,no-writes`` on the shebang line its caller puts first).
-- KEYS[1]: one of the keys (it routes the call to their node; not used here).
-- ARGV[1]: how many arguments the script takes, those arguments, then every key.
-- Reply: the script's reply over all the keys in that order, or false when a key is not served
-- here (a slot that moved, or is migrating with that key gone: the read raises), in which case
-- the caller runs the slots one group each (infra.luascripts.read_by_node). Nothing is written,
-- so a refused call leaves nothing to undo.
local n_args = tonumber(ARGV[1])
local args, keys = {}, {}
for i = 1, n_args do args[i] = ARGV[1 + i] end
for i = 2 + n_args, #ARGV do keys[#keys + 1] = ARGV[i] end
local ok, reply = pcall(body, keys, args)
if not ok then return false end
return reply
