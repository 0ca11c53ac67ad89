-- Replace a user's whole unread hash with recomputed counts (unread_rebuild).
-- KEYS[1] unread hash; ARGV = peer1, category1, count1, peer2, category2, count2, ...
-- Returns {old total, new total, number of conversations whose count changed}.
local old_total = tonumber(redis.call('HGET', KEYS[1], 't') or '0')
local old = redis.call('HGETALL', KEYS[1])
local old_peers = {}
for i = 1, #old, 2 do
  if string.sub(old[i], 1, 2) == 'p:' then old_peers[old[i]] = tonumber(old[i + 1]) end
end
redis.call('DEL', KEYS[1])
local total, changed, seen = 0, 0, {}
for i = 1, #ARGV, 3 do
  local n = tonumber(ARGV[i + 2])
  local field = 'p:' .. ARGV[i]
  seen[field] = true
  if n > 0 then
    redis.call('HSET', KEYS[1], field, n)
    redis.call('HINCRBY', KEYS[1], 'c:' .. ARGV[i + 1], n)
    total = total + n
  end
  if (old_peers[field] or 0) ~= n then changed = changed + 1 end
end
for field, n in pairs(old_peers) do
  if not seen[field] and n ~= 0 then changed = changed + 1 end
end
if total > 0 then redis.call('HSET', KEYS[1], 't', total) end
return {old_total, total, changed}
