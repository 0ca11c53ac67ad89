-- Included by adjust.lua and recount_peers.lua: one conversation's count in the unread hash
-- ``key`` set from ``was`` (filed under ``old_category``) to ``n`` (filed under ``category``), the
-- category and total fields kept equal to their parts; fields that reach zero are deleted.
local function bump(key, field, by)
  if by ~= 0 and redis.call('HINCRBY', key, field, by) == 0 then
    redis.call('HDEL', key, field)
  end
end

local function set_count(key, peer, old_category, category, was, n)
  bump(key, 'c:' .. old_category, -was)
  bump(key, 'c:' .. category, n)
  bump(key, 't', n - was)
  if n == 0 then
    redis.call('HDEL', key, 'p:' .. peer, 'k:' .. peer)
  else
    redis.call('HSET', key, 'p:' .. peer, n, 'k:' .. peer, category)
  end
end
