-- A device connects: presence, "recently online", the log's epoch (a new one when the log is
-- gone), and the entries after the device's cursor when it resumes in the same epoch.
-- KEYS: seen, dev, at, meta, log of one user.
-- ARGV: device, now (ms), connected until (ms), window (s), TTL (s), fresh epoch,
--       resume epoch ('' for none), resume position, at most this many entries.
-- Returns {epoch, head position, entries or false}; entries as XRANGE gives them.
local seen, dev, at, meta, log = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
redis.call('SET', seen, ARGV[2], 'EX', ARGV[4])
redis.call('ZREMRANGEBYSCORE', dev, '-inf', ARGV[2])
redis.call('ZADD', dev, ARGV[3], ARGV[1])
redis.call('HSET', at, ARGV[1], ARGV[2])
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch then
  epoch = ARGV[6]
  redis.call('DEL', log)
  redis.call('HSET', meta, 'epoch', epoch, 'pos', 0)
end
for _, key in ipairs({dev, at, meta, log}) do
  redis.call('EXPIRE', key, ARGV[5])
end
local head = tonumber(redis.call('HGET', meta, 'pos'))
local entries = false
if ARGV[7] == epoch and tonumber(ARGV[8]) < head then
  entries = redis.call('XRANGE', log, '0-' .. (tonumber(ARGV[8]) + 1), '+', 'COUNT', ARGV[9])
end
return {epoch, head, entries}
