-- Admit one batch against the per-(sender, receiver) caps and the sender's daily budget, at once.
-- KEYS[1] outcome marker, KEYS[2] budget key, KEYS[3..] quota bucket hashes.
-- ARGV[1] cap per receiver per period (0 = none), ARGV[2] quota ttl s, ARGV[3] budget limit
-- (-1 = none), ARGV[4] budget ttl s, ARGV[5] marker ttl s, ARGV[6..] pairs (receiver, KEYS index)
-- when there is a cap, else the receivers alone (no quota keys: nothing to count per receiver).
-- Returns {'ok', outcome} | {'replay', outcome} | {'budget', '0'}; outcome is
-- '<capped csv>|<deferred csv>': receivers over their cap, and receivers the budget could not cover
-- today (they go to a new batch that runs when the budget renews). When the budget covers nobody,
-- nothing is consumed. The outcome is stored, so a redelivered batch reads it back instead of
-- consuming quota or budget twice.
local stored = redis.call('GET', KEYS[1])
if stored then return {'replay', stored} end
local cap = tonumber(ARGV[1])
local allowed, capped = {}, {}
for i = 6, #ARGV, cap > 0 and 2 or 1 do
  local key = cap > 0 and KEYS[tonumber(ARGV[i + 1])]
  if key and tonumber(redis.call('HGET', key, ARGV[i]) or '0') >= cap then
    capped[#capped + 1] = ARGV[i]
  else
    allowed[#allowed + 1] = i
  end
end
local limit = tonumber(ARGV[3])
local deferred = {}
if limit >= 0 then
  local room = limit - tonumber(redis.call('GET', KEYS[2]) or '0')
  if room <= 0 and #allowed > 0 then return {'budget', '0'} end
  while #allowed > room do
    table.insert(deferred, 1, ARGV[table.remove(allowed)])
  end
  redis.call('INCRBY', KEYS[2], #allowed)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
if cap > 0 then
  local touched = {}
  for _, i in ipairs(allowed) do
    local key = KEYS[tonumber(ARGV[i + 1])]
    redis.call('HINCRBY', key, ARGV[i], 1)
    touched[key] = true
  end
  for key in pairs(touched) do redis.call('EXPIRE', key, ARGV[2]) end
end
local outcome = table.concat(capped, ',') .. '|' .. table.concat(deferred, ',')
redis.call('SET', KEYS[1], outcome, 'EX', ARGV[5])
return {'ok', outcome}
