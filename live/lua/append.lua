-- Append one event to the log of every recently online user among the callers' (one slot).
-- KEYS: per user seen, dev, at, meta, log (live/keys.py user_keys), users in the caller's order.
-- ARGV: event JSON, MAXLEN, TTL of meta and log (s), now (ms), a fresh epoch for a new log.
-- Returns a flat array, 4 items per user logged: index (1-based), epoch, position, online (0/1).
local out = {}
for i = 1, #KEYS, 5 do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    local meta, log = KEYS[i + 3], KEYS[i + 4]
    local epoch = redis.call('HGET', meta, 'epoch')
    if not epoch then
      epoch = ARGV[5]
      redis.call('DEL', log)
      redis.call('HSET', meta, 'epoch', epoch, 'pos', 0)
    end
    local pos = redis.call('HINCRBY', meta, 'pos', 1)
    redis.call('XADD', log, 'MAXLEN', ARGV[2], '0-' .. pos, 'e', ARGV[1], 'ms', ARGV[4])
    redis.call('EXPIRE', meta, ARGV[3])
    redis.call('EXPIRE', log, ARGV[3])
    local online = redis.call('ZCOUNT', KEYS[i + 1], ARGV[4], '+inf') > 0 and 1 or 0
    table.insert(out, (i + 4) / 5)
    table.insert(out, epoch)
    table.insert(out, pos)
    table.insert(out, online)
  end
end
return out
