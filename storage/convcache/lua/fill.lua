--#include _common.lua
-- Finish a fill: compare-and-set every entry read from the source, then (first finisher) set
-- the boundary and mark the cache ready. ARGV[1] generation, ARGV[2] source ('m' | 'h'),
-- ARGV[3] boundary member ('' with ARGV[4] = '1': the owner's whole list), ARGV[4] all,
-- ARGV[5] expiry (ms), ARGV[6] cap, ARGV[7] tombstone cap, then field, packed value pairs.
-- Returns 1 done, 0 the generation moved on (nothing written), -1 dropped.
local meta = redis.call('HMGET', H, '_g', '_s', '_tnt', '_f')
if meta[1] ~= ARGV[1] then return 0 end
if meta[2] == 'f' and meta[3] == '1' and ARGV[2] == 'h' then
  drop_all()
  return -1
end
local floor = tonumber(meta[4] or '0')
for i = 8, #ARGV, 2 do
  if apply(ARGV[i], ARGV[i + 1], true, floor) == -1 then
    drop_all()
    return -1
  end
end
if meta[2] == 'f' then
  redis.call('HSET', H, '_s', 'r', '_src', ARGV[2], '_b', ARGV[3], '_a', ARGV[4])
  redis.call('HDEL', H, '_tnt')
end
redis.call('HSET', H, '_x', ARGV[5])
expire_all(ARGV[5])
enforce(tonumber(ARGV[6]), tonumber(ARGV[7]))
return 1
