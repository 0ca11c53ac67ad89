--#include _common.lua
-- Start filling one owner's cache unless it exists. ARGV[1] new generation, ARGV[2] the fill's
-- deadline (ms). Returns {'begun' | 'filling' | 'ready', generation}.
local meta = redis.call('HMGET', H, '_g', '_s')
if not meta[1] then
  begin_fill(ARGV[1], ARGV[2])
  return {'begun', ARGV[1]}
end
return {meta[2] == 'f' and 'filling' or 'ready', meta[1]}
