-- Set or change one conversation's unread count, keeping the totals equal to their parts.
-- KEYS[1] unread hash; ARGV[1] peer, ARGV[2] category, ARGV[3] 'set' | 'add', ARGV[4] n.
-- The count never goes below zero. Returns the conversation's new count.
local peer_field = 'p:' .. ARGV[1]
local old = tonumber(redis.call('HGET', KEYS[1], peer_field) or '0')
local new = tonumber(ARGV[4])
if ARGV[3] == 'add' then new = old + new end
if new < 0 then new = 0 end
local delta = new - old
if delta ~= 0 then
  redis.call('HINCRBY', KEYS[1], 'c:' .. ARGV[2], delta)
  redis.call('HINCRBY', KEYS[1], 't', delta)
end
if new == 0 then
  redis.call('HDEL', KEYS[1], peer_field)
  if tonumber(redis.call('HGET', KEYS[1], 'c:' .. ARGV[2]) or '0') == 0 then
    redis.call('HDEL', KEYS[1], 'c:' .. ARGV[2])
  end
else
  redis.call('HSET', KEYS[1], peer_field, new)
end
return new
