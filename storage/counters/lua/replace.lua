-- Replace a user's whole unread hash with recomputed counts (unread_rebuild).
-- KEYS[1] unread hash; ARGV = digest, peer1, category1, count1, counted1, peer2, ... (each peer
-- at most once; peers left out have nothing unread). countedN: the newest msgkey the count includes, when
-- a delivery of it may still be on its way to this hash ('0': none): kept as ``r:<peer>`` so that
-- the delivery's own count skips it (incr_many.lua); only where the recount differs from the count
-- Redis held (a count on its way makes it differ; after a restart that kept its data nothing does,
-- so the hashes gain no field). A guard an earlier recount left is kept when this one counts the
-- same (two reads of a user repairing at once: the second found the first's count, and dropping
-- the guard let the delivery's count arrive on top of it, unread 2 for one message).
-- ARGV[1]: the hash's digest (digest.lua) when the recount began, or '*': when the hash has
-- changed since (a delivery's count or a read landed while the truth was being read, which the
-- recount may have missed), it is left as it is and {-1, -1, -1, -1} returned: the caller recounts.
-- Returns {old total, new total, conversations whose count changed, sum of |old - new| over them}.
--#include _digest.lua
local key = KEYS[1]
if ARGV[1] ~= '*' and digest(key) ~= ARGV[1] then return {-1, -1, -1, -1} end
local old_total = tonumber(redis.call('HGET', key, 't') or '0')
local old = redis.call('HGETALL', key)
local old_peers, old_guards = {}, {}
for i = 1, #old, 2 do
  local prefix = string.sub(old[i], 1, 2)
  if prefix == 'p:' then old_peers[old[i]] = tonumber(old[i + 1]) end
  if prefix == 'r:' then old_guards[old[i]] = old[i + 1] end
end
redis.call('DEL', key)
local total, changed, drift, seen, categories = 0, 0, 0, {}, {}
for i = 2, #ARGV, 4 do
  local n = tonumber(ARGV[i + 2])
  local peer_field = 'p:' .. ARGV[i]
  seen[peer_field] = true
  local was = old_peers[peer_field] or 0
  local guard_field = 'r:' .. ARGV[i]
  if ARGV[i + 3] ~= '0' and was ~= n then
    redis.call('HSET', key, guard_field, ARGV[i + 3])
  elseif ARGV[i + 3] ~= '0' and old_guards[guard_field] then
    redis.call('HSET', key, guard_field, old_guards[guard_field])
  end
  if n > 0 then
    redis.call('HSET', key, peer_field, n, 'k:' .. ARGV[i], ARGV[i + 1])
    categories[ARGV[i + 1]] = (categories[ARGV[i + 1]] or 0) + n
    total = total + n
  end
  if was ~= n then changed, drift = changed + 1, drift + math.abs(was - n) end
end
for field, n in pairs(old_peers) do
  if not seen[field] and n ~= 0 then changed, drift = changed + 1, drift + math.abs(n) end
end
for category, n in pairs(categories) do redis.call('HSET', key, 'c:' .. category, n) end
if total > 0 then redis.call('HSET', key, 't', total) end
return {old_total, total, changed, drift}
