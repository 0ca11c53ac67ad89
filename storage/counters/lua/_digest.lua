-- Included by digest.lua and replace.lua: a digest of the whole unread hash ``key`` (its fields
-- and values, sorted; '' when it does not exist), which every write to the hash changes.
local function digest(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return '' end
  local items = {}
  for i = 1, #flat, 2 do items[#items + 1] = flat[i] .. '=' .. flat[i + 1] end
  table.sort(items)
  return redis.sha1hex(table.concat(items, '\n'))
end
