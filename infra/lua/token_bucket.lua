-- A token bucket (per channel, per API client). KEYS[1] bucket hash; ARGV[1] rate per s, ARGV[2] capacity,
-- ARGV[3] tokens wanted, ARGV[4] now ms. Returns 0 when taken, else ms to wait for enough tokens.
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local want = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local tokens = tonumber(redis.call('HGET', KEYS[1], 'tokens') or ARGV[2])
local last = tonumber(redis.call('HGET', KEYS[1], 'ts') or ARGV[4])
if now > last then tokens = math.min(capacity, tokens + (now - last) * rate / 1000) end
if tokens >= want then
  redis.call('HSET', KEYS[1], 'tokens', tokens - want, 'ts', math.max(now, last))
  redis.call('PEXPIRE', KEYS[1], 3600000)
  return 0
end
redis.call('HSET', KEYS[1], 'tokens', tokens, 'ts', math.max(now, last))
redis.call('PEXPIRE', KEYS[1], 3600000)
return math.ceil((want - tokens) * 1000 / rate)
