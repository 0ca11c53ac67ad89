-- Count one new message from one peer for many owners, at most once per marker.
-- KEYS[1]   marker key (ignored when ARGV[4] == '0'); KEYS[2..] unread hashes of owners.
-- ARGV[1] peer uid, ARGV[2] category, ARGV[3] delta, ARGV[4] the marker's kind: '0' none, '1' a
-- key of its own (SET NX), '2' bit ARGV[6] of a series' bitmap (SETBIT: its old value says whether
-- the change was applied), ARGV[5] the marker's ttl in seconds (a bitmap's counted from its first
-- bit: EXPIRE NX changes nothing once set, so the later bits cost no write to replicate),
-- ARGV[7] the msgkey a new message's count is for ('0': none).
-- A recount of an owner (replace.lua) that already counted that very message
-- left ``r:<peer>`` = the newest msgkey it counted: the delivery's own count, arriving after it,
-- is then skipped once (and the field dropped), so a repair racing a delivery counts it once. A
-- newer message's count drops the field too (the recounted message's delivery is long done).
-- A count never goes below zero. The conversation's whole count is filed under ARGV[2] (``k:``
-- remembers where it was filed, so a conversation that changed category moves its count).
-- In the common case one HMGET and one HSET per owner, the new totals computed here (a bulk
-- batch spends most of its Redis time in this loop: 4.7 → 3.9 ms of server time per 1,000 new
-- owners, 5.0 → 4.2 when half of them already hold counts, measured).
-- Every key is read before the first write (the owners' hashes, then the marker): on a Redis
-- Cluster a key this node cannot serve (a slot that moved, or is migrating with that key gone)
-- raises on its read, so a group either fails with nothing written or runs whole, and the
-- per-node driver (infra/lua/_per_node.lua) needs no check of its own before it.
-- Returns the number of owners changed (0 when the marker says it was already applied).
local peer_field, kind_field, recount_field = 'p:' .. ARGV[1], 'k:' .. ARGV[1], 'r:' .. ARGV[1]
local msgkey = ARGV[7] or '0'
local category, delta = ARGV[2], tonumber(ARGV[3])
local category_field = 'c:' .. category
local read = {}
for i = 2, #KEYS do
  read[i] = redis.call('HMGET', KEYS[i], peer_field, kind_field, 't', category_field,
                      recount_field)
end
if ARGV[4] == '1' then
  if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[5]) then
    return 0
  end
elseif ARGV[4] == '2' then
  if redis.call('SETBIT', KEYS[1], ARGV[6], 1) == 1 then
    return 0
  end
  redis.call('EXPIRE', KEYS[1], ARGV[5], 'NX')
end
-- Zero fields are deleted, so the hash holds only what is unread.
local function put(key, field, value)
  if value == 0 then redis.call('HDEL', key, field) else redis.call('HSET', key, field, value) end
end

-- msgkeys are decimal text up to 2^63 (past a Lua number's 2^53): compared by length, then text
local function newer(a, b)
  if #a ~= #b then return #a > #b end
  return a > b
end

local done, skipped = {}, 0
for i = 2, #KEYS do
  local key = KEYS[i]
  local got = read[i]
  if done[key] then  -- an owner named twice: its first count is written, read it again
    got = redis.call('HMGET', key, peer_field, kind_field, 't', category_field, recount_field)
  end
  done[key] = true
  local recount = got[5]  -- nil but for a conversation recounted while deliveries ran
  if recount and delta > 0 and recount == msgkey then
    redis.call('HDEL', key, recount_field)  -- the recount counted this very message already
    skipped = skipped + 1
  else
    if recount and newer(msgkey, recount) then redis.call('HDEL', key, recount_field) end
    local old = tonumber(got[1] or '0')
    local new = math.max(old + delta, 0)
    local old_category = got[2] or category
    local in_category = tonumber(got[4] or '0') + new
    if old_category == category then
      in_category = in_category - old
    else  -- the conversation's whole count moves from its old category to this one
      local old_field = 'c:' .. old_category
      put(key, old_field, tonumber(redis.call('HGET', key, old_field) or '0') - old)
    end
    local total = tonumber(got[3] or '0') + new - old
    if new > 0 and in_category > 0 and total > 0 then
      redis.call('HSET', key, peer_field, new, kind_field, category, category_field, in_category,
                 't', total)
    else
      put(key, category_field, in_category)
      put(key, 't', total)
      if new == 0 then
        redis.call('HDEL', key, peer_field, kind_field)
      else
        redis.call('HSET', key, peer_field, new, kind_field, category)
      end
    end
  end
end
return #KEYS - 1 - skipped
