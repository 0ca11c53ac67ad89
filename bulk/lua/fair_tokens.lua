-- A channel's rate, shared fairly by the campaigns drawing on it. KEYS[1] the channel's bucket
-- (hash tokens, ts), KEYS[2] the channel's active campaigns (zset campaign -> last ask, ms),
-- KEYS[3] this campaign's own bucket; all three carry the channel's {ch:<channel>} tag.
-- ARGV: rate per s, capacity, tokens wanted, now ms, campaign id, active window ms.
-- A campaign that asked within the window is active; each of the n active campaigns may take at
-- most rate / n per second from its own bucket, and every take also comes out of the channel's
-- bucket, which alone keeps the channel under its rate. Returns 0 when taken, else the ms to wait.
local rate, capacity = tonumber(ARGV[1]), tonumber(ARGV[2])
local want, now = tonumber(ARGV[3]), tonumber(ARGV[4])
redis.call('ZADD', KEYS[2], now, ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[6]))
redis.call('PEXPIRE', KEYS[2], 3600000)
local n = math.max(1, redis.call('ZCARD', KEYS[2]))
local share = rate / n
local share_cap = math.max(capacity / n, want)

local function refill(key, per_s, cap)
  local tokens = tonumber(redis.call('HGET', key, 'tokens') or cap)
  local last = tonumber(redis.call('HGET', key, 'ts') or now)
  if now > last then tokens = math.min(cap, tokens + (now - last) * per_s / 1000) end
  return tokens, math.max(now, last)
end

local mine, mine_ts = refill(KEYS[3], share, share_cap)
local all, all_ts = refill(KEYS[1], rate, capacity)
local wait = 0
if mine < want then wait = math.ceil((want - mine) * 1000 / share) end
if all < want then wait = math.max(wait, math.ceil((want - all) * 1000 / rate)) end
if wait == 0 then
  mine = mine - want
  all = all - want
end
redis.call('HSET', KEYS[3], 'tokens', mine, 'ts', mine_ts)
redis.call('HSET', KEYS[1], 'tokens', all, 'ts', all_ts)
redis.call('PEXPIRE', KEYS[3], 3600000)
redis.call('PEXPIRE', KEYS[1], 3600000)
return wait
