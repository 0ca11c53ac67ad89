--#include _common.lua
-- A push's first step: the owner's cache generation, read before the pushed state is read from
-- MySQL. KEYS[4] burst set, KEYS[5] prewarm marker. ARGV[1] peer, ARGV[2] '1' to count a burst,
-- ARGV[3] burst threshold, ARGV[4] burst window (s), ARGV[5] prewarm window (s).
-- Returns {generation or nil, 1 when this push starts a burst prewarm}.
local g = redis.call('HGET', H, '_g')
if g then return {g, 0} end
if ARGV[2] ~= '1' then return {false, 0} end
local limit = tonumber(ARGV[3])
local n = redis.call('SCARD', KEYS[4])
if n > limit then return {false, 0} end
if redis.call('SADD', KEYS[4], ARGV[1]) == 1 then
  n = n + 1
  if n == 1 then redis.call('EXPIRE', KEYS[4], ARGV[4]) end
end
if n > limit and redis.call('SET', KEYS[5], '1', 'NX', 'EX', ARGV[5]) then return {false, 1} end
return {false, 0}
