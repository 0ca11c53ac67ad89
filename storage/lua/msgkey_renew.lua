-- KEYS[1] lease key, KEYS[2] high-water key; ARGV[1] token, ARGV[2] ttl ms, ARGV[3] last ms issued.
-- Extends the lease only for its holder and records how far the holder has issued keys.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('SET', KEYS[2], ARGV[3])
  return 1
end
return 0
