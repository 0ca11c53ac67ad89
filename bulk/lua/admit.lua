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
-- One command per new receiver: a bucket that did not exist before this batch holds no count,
-- so its receivers are counted without a read (and a count past the cap, a receiver named
-- twice, taken back); in a bucket that existed a receiver's count is read first, so a second
-- campaign to the same receivers writes nothing for the capped ones. Receivers past the budget's
-- room are only read: they are not counted today.
local stored = redis.call('GET', KEYS[1])
if stored then return {'replay', stored} end
local cap = tonumber(ARGV[1])
local step = cap > 0 and 2 or 1
local limit = tonumber(ARGV[3])
local room = math.huge
if limit >= 0 then room = limit - tonumber(redis.call('GET', KEYS[2]) or '0') end
local admitted, capped, deferred, fresh, touched = 0, {}, {}, {}, {}

local function at_cap(key, receiver)
  return tonumber(redis.call('HGET', key, receiver) or '0') >= cap
end

-- Count the receiver unless it is at its cap; false when it is.
local function count(key, receiver)
  if fresh[key] == nil then fresh[key] = redis.call('EXISTS', key) == 0 end
  if not fresh[key] and at_cap(key, receiver) then return false end
  if redis.call('HINCRBY', key, receiver, 1) > cap then
    redis.call('HINCRBY', key, receiver, -1)
    return false
  end
  touched[key] = true
  return true
end

for i = 6, #ARGV, step do
  local receiver = ARGV[i]
  local key = cap > 0 and KEYS[tonumber(ARGV[i + 1])]
  if admitted >= room then  -- past the budget: counted nowhere, only told apart from the capped
    if key and at_cap(key, receiver) then
      capped[#capped + 1] = receiver
    else
      deferred[#deferred + 1] = receiver
    end
  elseif key and not count(key, receiver) then
    capped[#capped + 1] = receiver
  else
    admitted = admitted + 1
  end
end
if limit >= 0 then
  if admitted == 0 and #deferred > 0 then return {'budget', '0'} end
  redis.call('INCRBY', KEYS[2], admitted)
  redis.call('EXPIRE', KEYS[2], ARGV[4])
end
-- A few hashes a batch. Not EXPIRE NX: Redis 6.2 (the demo's embedded server) refuses it.
for key in pairs(touched) do redis.call('EXPIRE', key, ARGV[2]) end
local outcome = table.concat(capped, ',') .. '|' .. table.concat(deferred, ',')
redis.call('SET', KEYS[1], outcome, 'EX', ARGV[5])
return {'ok', outcome}
