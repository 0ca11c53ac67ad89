-- Count one new message from one peer for many owners, at most once per marker.
-- KEYS[1]   marker key (ignored when ARGV[4] == '0'); KEYS[2..] unread hashes of owners.
-- ARGV[1] peer uid, ARGV[2] category, ARGV[3] delta, ARGV[4] '1' to honour the marker,
-- ARGV[5] marker ttl seconds.
-- A count never goes below zero. The conversation's whole count is filed under ARGV[2] (``k:``
-- remembers where it was filed, so a conversation that changed category moves its count).
-- Returns the number of owners changed (0 when the marker says it was already applied).
if ARGV[4] == '1' then
  if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[5]) then
    return 0
  end
end
local peer_field, kind_field = 'p:' .. ARGV[1], 'k:' .. ARGV[1]
local category, delta = ARGV[2], tonumber(ARGV[3])

local function bump(key, field, by)
  if by ~= 0 and redis.call('HINCRBY', key, field, by) == 0 then
    redis.call('HDEL', key, field)
  end
end

for i = 2, #KEYS do
  local key = KEYS[i]
  local old = tonumber(redis.call('HGET', key, peer_field) or '0')
  local old_category = redis.call('HGET', key, kind_field) or category
  local new = math.max(old + delta, 0)
  bump(key, 'c:' .. old_category, -old)
  bump(key, 'c:' .. category, new)
  bump(key, 't', new - old)
  if new == 0 then
    redis.call('HDEL', key, peer_field, kind_field)
  else
    redis.call('HSET', key, peer_field, new, kind_field, category)
  end
end
return #KEYS - 1
