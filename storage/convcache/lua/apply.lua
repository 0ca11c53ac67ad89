--#include _common.lua
-- Push records into one owner's cache, each only if newer (compare-and-set on the version).
-- ARGV[1] the generation the push saw before reading MySQL ('' for none), ARGV[2] cap,
-- ARGV[3] tombstone cap, then field, packed value pairs.
-- Returns the number applied, or -1 when the cache was dropped (it could not decide safely).
local meta = redis.call('HMGET', H, '_g', '_s', '_src', '_f', '_x')
if not meta[1] then return 0 end
local same = meta[1] == ARGV[1]
local floor = tonumber(meta[4] or '0')
local applied = 0
for i = 4, #ARGV, 2 do
  local r = apply(ARGV[i], ARGV[i + 1], same, floor)
  if r == 1 then
    applied = applied + 1
  elseif r == -1 then
    drop_all()
    return -1
  elseif r == -2 then
    -- The cache was (re)started after this push read the generation. A fill from MySQL read
    -- after our commit and holds this state or newer; a fill from HBase may have missed it.
    if meta[2] == 'f' then
      redis.call('HSET', H, '_tnt', '1')
    elseif meta[3] == 'h' then
      drop_all()
      return -1
    end
  end
end
if meta[2] == 'r' then
  enforce(tonumber(ARGV[2]), tonumber(ARGV[3]))
else
  redis.call('HSET', H, '_n', redis.call('ZCARD', Z))
end
redis.call('PEXPIREAT', Z, meta[5])
redis.call('PEXPIREAT', T, meta[5])
return applied
