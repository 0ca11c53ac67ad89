--#include _summary.lua
-- A message was recalled: KEYS[1] ghead:{g:<gid>}, KEYS[2] grecall:{g:<gid>},
-- KEYS[3] gsum:{g:<gid>} (one tag). ARGV: seq, the recalled summary JSON, recalls kept.
-- Idempotent (sets; the summary only if it shows seq). Without a head, nothing but the set:
-- the head is rebuilt from MySQL, recalls included.
redis.call('ZADD', KEYS[2], ARGV[1], ARGV[1])
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if redis.call('HGET', KEYS[1], 'ls') == ARGV[1] then
  redis.call('HSET', KEYS[1], 'last', ARGV[2])
end
local max, seqs, cut = summary_parse(redis.call('GET', KEYS[3]))
seqs[#seqs + 1] = tonumber(ARGV[1])
local head_max = tonumber(redis.call('HGET', KEYS[1], 'max') or '0')
if head_max > max then max = head_max end
summary_write(KEYS[3], max, seqs, cut, tonumber(ARGV[3]), KEYS[1])
return 1
