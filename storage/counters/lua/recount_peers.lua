-- Set some conversations' unread counts to recounted values and leave the owner's others, keeping
-- the totals equal to their parts (the binlog follower: a read position, a category or a
-- conversation changed in SQL; unread_recount_pairs).
-- KEYS[1] unread hash; ARGV = peer1, category1, count1, counted1, before1, peer2, ...: the first
-- four as replace.lua's. countedN: the newest msgkey the count includes when a delivery of it may
-- still be on its way ('0': none). Where the recount differs from the count Redis held it is kept
-- as ``r:<peer>``, so that the delivery's own count skips it (incr_many.lua); where it is the
-- same, a guard an earlier recount left stays; '0' drops it. beforeN: the count Redis held before
-- the recount began ('*': unchecked); a conversation whose count changed since (a delivery or a
-- read landed while the truth was read, which the recount may have missed) is left as it is.
-- Returns the owner's new total, then the peers left.
--#include _set_count.lua
local key = KEYS[1]
local left = {}
for i = 1, #ARGV, 5 do
  local peer, category, n, counted = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), ARGV[i + 3]
  local got = redis.call('HMGET', key, 'p:' .. peer, 'k:' .. peer)
  local was = tonumber(got[1] or '0')
  if ARGV[i + 4] ~= '*' and tonumber(ARGV[i + 4]) ~= was then
    left[#left + 1] = peer
  else
    if counted ~= '0' and was ~= n then
      redis.call('HSET', key, 'r:' .. peer, counted)
    elseif counted == '0' then
      redis.call('HDEL', key, 'r:' .. peer)
    end
    set_count(key, peer, got[2] or category, category, was, n)
  end
end
return {tonumber(redis.call('HGET', key, 't') or '0'), unpack(left)}
