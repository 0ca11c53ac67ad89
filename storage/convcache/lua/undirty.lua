--#include _common.lua
-- Clear the HBase-dirty marker (KEYS[1]) if the failure it records happened before ARGV[1] (ms),
-- the moment a rebuild of that HBase row began. Returns 1 when cleared.
local at = redis.call('GET', KEYS[1])
if at and tonumber(at) < tonumber(ARGV[1]) then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
