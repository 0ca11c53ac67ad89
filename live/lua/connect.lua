-- A device connects: presence, "recently online", the log's epoch (a new one when the log is
-- gone or Redis restarted since it was written: _epoch.lua), and the entries after the
-- device's cursor when it resumes in this epoch, or in the one before a restart up to ``floor``.
-- KEYS: seen, dev, at, meta, log of one user.
-- ARGV: device, now (ms), connected until (ms), window (s), TTL (s), fresh epoch,
--       resume epoch ('' for none), resume position, at most this many entries.
-- Returns {epoch, head position, entries or false, epoch before a restart or '', floor};
-- entries as XRANGE gives them.
local seen, dev, at, meta, log = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
--#include _epoch.lua
redis.call('SET', seen, ARGV[2], 'EX', ARGV[4])
redis.call('ZREMRANGEBYSCORE', dev, '-inf', ARGV[2])
redis.call('ZADD', dev, ARGV[3], ARGV[1])
redis.call('HSET', at, ARGV[1], ARGV[2])
local epoch, prev, floor = epoch_of(meta, log, ARGV[6])
for _, key in ipairs({dev, at, meta, log}) do
  redis.call('EXPIRE', key, ARGV[5])
end
local head = tonumber(redis.call('HGET', meta, 'pos'))
local since = tonumber(ARGV[8])
local entries = false
local same = ARGV[7] == epoch or (ARGV[7] ~= '' and ARGV[7] == prev and since <= floor)
if same and since < head then
  entries = redis.call('XRANGE', log, '0-' .. (since + 1), '+', 'COUNT', ARGV[9])
end
return {epoch, head, entries, prev, floor}
