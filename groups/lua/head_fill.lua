--#include _summary.lua
-- Rebuild a group's head from MySQL: KEYS[1] ghead:{g:<gid>}, KEYS[2] grecall:{g:<gid>},
-- KEYS[3] gsum:{g:<gid>}. ARGV: max, ls, at, sk, summary JSON ('' for none), recalls kept,
-- then the recalled seqs. Max-merge with whatever a concurrent send wrote meanwhile.
local max = tonumber(redis.call('HGET', KEYS[1], 'max') or '-1')
if tonumber(ARGV[1]) > max then
  redis.call('HSET', KEYS[1], 'max', ARGV[1])
  max = tonumber(ARGV[1])
end
local shown = tonumber(redis.call('HGET', KEYS[1], 'ls') or '-1')
if tonumber(ARGV[2]) > shown then
  redis.call('HSET', KEYS[1], 'ls', ARGV[2], 'at', ARGV[3], 'sk', ARGV[4], 'last', ARGV[5])
end
local seqs = {}
for i = 7, #ARGV do
  redis.call('ZADD', KEYS[2], ARGV[i], ARGV[i])
  seqs[#seqs + 1] = tonumber(ARGV[i])
end
for _, s in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do seqs[#seqs + 1] = tonumber(s) end
summary_write(KEYS[3], max, seqs, '0', tonumber(ARGV[6]), KEYS[1])
return 1
