--#include _member.lua
-- Write a member's positions as MySQL has them (join, rebuild): KEYS[1] gmember:{u:<uid>};
-- ARGV: gid, read, mentions csv, hidden csv, then 'set', 'keep' (keep a read position already
-- ahead) or 'ifmissing' (write only a position Redis lacks: a join retried after a failure).
local read = tonumber(ARGV[2])
local value = redis.call('HGET', KEYS[1], ARGV[1])
if value and ARGV[5] == 'ifmissing' then return -1 end
if value and ARGV[5] == 'keep' then
  local current = parse(value)
  if current > read then read = current end
end
write(KEYS[1], ARGV[1], read, split(ARGV[3]), split(ARGV[4]))
redis.call('HSET', KEYS[1], '_', '1')
redis.call('PERSIST', KEYS[1])  -- a user with no groups had only a marker that expires
return read
