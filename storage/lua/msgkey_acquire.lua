-- KEYS[1] lease key, KEYS[2] high-water key; ARGV[1] token, ARGV[2] ttl ms,
-- ARGV[3] the earliest millisecond the caller may start at (its clock, or past its own last key).
-- Takes the lease if it is free and returns the millisecond the new holder starts at: no earlier
-- than ARGV[3] and at least one lease-TTL past the node's high-water mark. The start is recorded
-- as the new high-water mark at once, so a holder that dies before its first renewal still leaves
-- one behind. Returns nil when another process holds the lease.
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return nil
end
local hwm = tonumber(redis.call('GET', KEYS[2]) or '0')
local start = math.max(tonumber(ARGV[3]), hwm + tonumber(ARGV[2]))
redis.call('SET', KEYS[2], string.format('%d', start))
return start
