-- A device disconnects: it is no longer online; its user stays recently online for the window.
-- KEYS: seen, dev, at of one user. ARGV: device, now (ms), window (s).
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('SET', KEYS[1], ARGV[2], 'EX', ARGV[3])
return 1
