-- Included (``--#include``) by every script of the conversation-list cache. KEYS[1] is the
-- owner's hash (meta + packed summaries), KEYS[2] the order zset (live entries), KEYS[3] the
-- tombstone zset.
local H, Z, T = KEYS[1], KEYS[2], KEYS[3]

-- The header of a packed summary: mtime, member, tombstone?, category, decimal peer uid.
local function parse(v)
  local m, mem, k, cat, peer = string.match(v, '^(%d+)|(%x*)|(%u)|([^|]*)|(%d*)|')
  return tonumber(m), mem, k == 'T', cat, peer
end

-- Is version (m1, tomb1) newer than (m2, tomb2)? At equal mtimes a tombstone wins.
local function newer(m1, t1, m2, t2)
  if m1 ~= m2 then return m1 > m2 end
  return t1 and not t2
end

-- Compare-and-set one record. Returns 1 applied, 0 not newer than the cached version,
-- -1 absent and not newer than the floor (a forgotten tombstone may have been newer),
-- -2 absent while inserts are not allowed.
local function apply(field, v, insert_ok, floor)
  local m, mem, tomb = parse(v)
  local old = redis.call('HGET', H, field)
  if old then
    local om, omem, otomb = parse(old)
    if not newer(m, tomb, om, otomb) then return 0 end
    if otomb then redis.call('ZREM', T, field) else redis.call('ZREM', Z, omem) end
  else
    if not insert_ok then return -2 end
    if m <= floor then return -1 end
  end
  redis.call('HSET', H, field, v)
  if tomb then redis.call('ZADD', T, m, field) else redis.call('ZADD', Z, 0, mem) end
  return 1
end

local function drop_all()
  redis.call('DEL', H, Z, T)
end

local function begin_fill(gen, until_ms)
  drop_all()
  redis.call('HSET', H, '_g', gen, '_s', 'f', '_n', '0', '_f', '0', '_x', until_ms)
  redis.call('PEXPIREAT', H, until_ms)
end

-- At most cap live entries: the lowest become tombstones of the same version and the boundary
-- rises above them. At most tcap tombstones: the oldest are forgotten and the floor keeps the
-- newest forgotten mtime.
local function enforce(cap, tcap)
  local n = redis.call('ZCARD', Z)
  if n > cap then
    local meta = redis.call('HMGET', H, '_a', '_b')
    local bound = meta[2] or ''
    local crossed = meta[1] == '1'
    local popped = redis.call('ZPOPMIN', Z, n - cap)
    for i = 1, #popped, 2 do
      local mem = popped[i]
      local field = string.sub(mem, 17)
      local m, _, _, _, peer = parse(redis.call('HGET', H, field))
      local dead = string.format('%d', m) .. '|' .. mem .. '|T||' .. peer .. '|'
      redis.call('HSET', H, field, dead)
      redis.call('ZADD', T, m, field)
      if mem >= bound then crossed = true end
    end
    if crossed then
      redis.call('HSET', H, '_a', '0', '_b', redis.call('ZRANGE', Z, 0, 0)[1])
    end
  end
  local nt = redis.call('ZCARD', T)
  if nt > tcap then
    local floor = tonumber(redis.call('HGET', H, '_f') or '0')
    local popped = redis.call('ZPOPMIN', T, nt - tcap)
    for i = 1, #popped, 2 do
      redis.call('HDEL', H, popped[i])
      local m = tonumber(popped[i + 1])
      if m > floor then floor = m end
    end
    redis.call('HSET', H, '_f', string.format('%d', floor))
  end
  redis.call('HSET', H, '_n', redis.call('ZCARD', Z))
end

local function expire_all(at)
  redis.call('PEXPIREAT', H, at)
  redis.call('PEXPIREAT', Z, at)
  redis.call('PEXPIREAT', T, at)
end
