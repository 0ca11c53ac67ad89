-- A connected device's heartbeat: it stays online and its user recently online.
-- KEYS: seen, dev, at, meta, log of one user. ARGV: device, now (ms), until (ms), window (s), TTL (s).
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
for i = 2, 5 do
  redis.call('EXPIRE', KEYS[i], ARGV[5])
end
return 1
