--#include _common.lua
-- One page of an owner's list, with the live unread counts, in one round trip.
-- KEYS[4] the owner's unread hash, KEYS[5] the HBase-dirty marker.
-- ARGV[1] generation to start a fill with on a miss, ARGV[2] its deadline (ms), ARGV[3] cursor
-- member ('' first page), ARGV[4] items wanted (limit + 1), ARGV[5] category ('' any).
-- Returns {'hit', values, unread counts} | {'beyond'} (the page leaves the cached prefix) |
-- {'miss' | 'filling', generation, HBase-dirty marker}.
local meta = redis.call('HMGET', H, '_g', '_s', '_n', '_a', '_b')
local dirty = redis.call('GET', KEYS[5]) or ''
if not meta[1] or (meta[2] == 'r' and tonumber(meta[3]) ~= redis.call('ZCARD', Z)) then
  begin_fill(ARGV[1], ARGV[2])  -- absent, or torn (one key expired apart from the others)
  return {'miss', ARGV[1], dirty}
end
if meta[2] == 'f' then return {'filling', meta[1], dirty} end
local all = meta[4] == '1'
local bound = meta[5] or ''
local cursor = ARGV[3]
if cursor ~= '' and not all and cursor <= bound then return {'beyond'} end
local hi = cursor == '' and '+' or '(' .. cursor
local lo = all and '-' or '[' .. bound
local want = tonumber(ARGV[4])
local values = {}
if ARGV[5] == '' then
  local members = redis.call('ZREVRANGEBYLEX', Z, hi, lo, 'LIMIT', 0, want)
  local fields = {}
  for i, mem in ipairs(members) do fields[i] = string.sub(mem, 17) end
  if #fields > 0 then values = redis.call('HMGET', H, unpack(fields)) end
else
  local offset = 0
  while #values < want do
    local members = redis.call('ZREVRANGEBYLEX', Z, hi, lo, 'LIMIT', offset, 100)
    offset = offset + #members
    for _, mem in ipairs(members) do
      local v = redis.call('HGET', H, string.sub(mem, 17))
      local _, _, _, cat = parse(v)
      if cat == ARGV[5] and #values < want then values[#values + 1] = v end
    end
    if #members < 100 then break end
  end
end
if #values < want and not all then return {'beyond'} end
local fields = {}
for i, v in ipairs(values) do
  local _, _, _, _, peer = parse(v)
  fields[i] = 'p:' .. peer
end
local counts = {}
if #fields > 0 then counts = redis.call('HMGET', KEYS[4], unpack(fields)) end
return {'hit', values, counts}
