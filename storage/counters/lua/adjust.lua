-- Set or change one conversation's unread count, keeping the totals equal to their parts.
-- KEYS[1] unread hash; ARGV[1] peer, ARGV[2] category, ARGV[3] 'set' | 'add', ARGV[4] n.
-- The count never goes below zero, and the conversation's whole count is filed under ARGV[2]
-- (``k:`` remembers where it was filed, so a conversation that changed category moves its count).
-- Returns the conversation's new count.
local key = KEYS[1]
local peer_field, kind_field = 'p:' .. ARGV[1], 'k:' .. ARGV[1]
local category = ARGV[2]
local old = tonumber(redis.call('HGET', key, peer_field) or '0')
local old_category = redis.call('HGET', key, kind_field) or category
local new = tonumber(ARGV[4])
if ARGV[3] == 'add' then new = old + new end
if new < 0 then new = 0 end

local function bump(field, by)
  if by ~= 0 and redis.call('HINCRBY', key, field, by) == 0 then
    redis.call('HDEL', key, field)
  end
end

bump('c:' .. old_category, -old)
bump('c:' .. category, new)
bump('t', new - old)
if new == 0 then
  redis.call('HDEL', key, peer_field, kind_field)
else
  redis.call('HSET', key, peer_field, new, kind_field, category)
end
return new
