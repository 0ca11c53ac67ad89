-- Shared by the member scripts (``--#include``d): parse and write a ``read|mentions|hidden`` value.
local function split(text)
  local out = {}
  for n in string.gmatch(text or '', '[^,]+') do out[#out + 1] = tonumber(n) end
  return out
end
local function parse(value)
  local read, m, h = string.match(value, '^(%d+)|([%d,]*)|([%d,]*)$')
  return tonumber(read), split(m), split(h)
end
local function after(seqs, read)
  local out = {}
  for _, s in ipairs(seqs) do if s > read then out[#out + 1] = s end end
  return out
end
local function join(seqs)
  local parts = {}
  for i, s in ipairs(seqs) do parts[i] = string.format('%d', s) end
  return table.concat(parts, ',')
end
local function write(key, field, read, m, h)
  redis.call('HSET', key, field, string.format('%d', read) .. '|' .. join(after(m, read)) .. '|' .. join(after(h, read)))
end
local function has(seqs, seq)
  for _, s in ipairs(seqs) do if s == seq then return true end end
  return false
end
local function without(seqs, seq)
  local out = {}
  for _, s in ipairs(seqs) do if s ~= seq then out[#out + 1] = s end end
  return out
end
