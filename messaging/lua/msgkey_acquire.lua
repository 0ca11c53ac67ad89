-- KEYS[1] lease key, KEYS[2] high-water key; ARGV[1] token, ARGV[2] ttl ms.
-- Returns the node's high-water millisecond (0 if never used) when the lease was taken, else nil.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return tonumber(redis.call('GET', KEYS[2]) or '0')
end
return nil
