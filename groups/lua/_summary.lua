-- Shared by the head scripts (``--#include``d): the group's summary, a string key beside the head,
-- ``<max>|<recalled seqs, ascending, csv>|<1 if older recalls were dropped, else 0>|<sk>``
-- (``sk``: the head's sort key, the list's order), read with one MGET per slot by the unread
-- fast path and the conversation list. A summary written before ``sk`` was added parses too.
local function summary_parse(value)
  if not value then return 0, {}, '0' end
  local max, list, cut = string.match(value, '^(%d+)|([%d,]*)|([01])')
  local seqs = {}
  for n in string.gmatch(list or '', '[^,]+') do seqs[#seqs + 1] = tonumber(n) end
  return tonumber(max) or 0, seqs, cut or '0'
end
-- ``head`` is the group's head key: the summary carries its sort key as it is now.
local function summary_write(key, max, seqs, cut, keep, head)
  table.sort(seqs)
  local uniq = {}
  for _, s in ipairs(seqs) do if uniq[#uniq] ~= s then uniq[#uniq + 1] = s end end
  local from = 1
  if #uniq > keep then from = #uniq - keep + 1; cut = '1' end
  local parts = {}
  for i = from, #uniq do parts[#parts + 1] = string.format('%d', uniq[i]) end
  local sk = redis.call('HGET', head, 'sk') or '0'
  redis.call('SET', key, string.format('%d', max) .. '|' .. table.concat(parts, ',') .. '|' .. cut .. '|' .. sk)
end
