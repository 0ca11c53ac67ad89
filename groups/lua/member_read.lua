--#include _member.lua
-- Move a member's read position: KEYS[1] gmember:{u:<uid>}; ARGV: gid, seq.
-- Never backwards; markers at or before it go. Returns the read seq, or -1 if not a member here.
local value = redis.call('HGET', KEYS[1], ARGV[1])
if not value then return -1 end
local read, m, h = parse(value)
local seq = tonumber(ARGV[2])
if seq > read then read = seq end
write(KEYS[1], ARGV[1], read, m, h)
return read
