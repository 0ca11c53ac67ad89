--#include _member.lua
-- Add or drop one marker of a member: KEYS[1] gmember:{u:<uid>}; ARGV: gid, seq, kind
-- ('m' mention, 'h' hidden for me), op ('add' | 'del'). Idempotent; a marker at or before the
-- read position is never added (it would count nothing).
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return 0 end
local read, m, h = parse(value)
local seq = tonumber(ARGV[2])
local list = m
if ARGV[3] == 'h' then list = h end
if ARGV[4] == 'add' then
  if seq <= read or has(list, seq) then return 0 end
  list[#list + 1] = seq
else
  if not has(list, seq) then return 0 end
  list = without(list, seq)
end
if ARGV[3] == 'h' then h = list else m = list end
write(KEYS[1], ARGV[1], read, m, h)
return 1
