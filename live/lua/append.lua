-- Append one event to the log of every recently online user among the callers' (one slot).
-- KEYS: per user seen, dev, at, meta, log (live/keys.py user_keys), users in the caller's order.
-- ARGV: event JSON, MAXLEN, TTL of meta and log (s), now (ms), a fresh epoch for a new log.
-- Returns a flat array, 6 items per user logged: index (1-based), epoch, position, online (0/1),
-- the epoch before a Redis restart ('' for none) and the last position that survived it.
-- The epoch moves on when the log is gone or Redis restarted since it was written (_epoch.lua).
--#include _epoch.lua
local out = {}
for i = 1, #KEYS, 5 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local meta, log = KEYS[i + 3], KEYS[i + 4]
    local epoch, prev, floor = epoch_of(meta, log, ARGV[5])
    local pos = redis.call('HINCRBY', meta, 'pos', 1)
    redis.call('XADD', log, 'MAXLEN', ARGV[2], '0-' .. pos, 'e', ARGV[1], 'ms', ARGV[4])
    redis.call('EXPIRE', meta, ARGV[3])
    redis.call('EXPIRE', log, ARGV[3])
    local online = redis.call('ZCOUNT', KEYS[i + 1], ARGV[4], '+inf') > 0 and 1 or 0
    for _, item in ipairs({(i + 4) / 5, epoch, pos, online, prev, floor}) do
      table.insert(out, item)
    end
  end
end
return out
