--#include _summary.lua
-- A message reached the group's head: KEYS[1] ghead:{g:<gid>}, KEYS[2] gsum:{g:<gid>}.
-- ARGV: seq, at_ms, sort_key, summary JSON, recalls kept. Max-merge: a replay or a late writer
-- never moves the head back; the last-message summary (and the sort key) follow the highest
-- seq; the summary key is rewritten when either moved.
local seq = tonumber(ARGV[1])
local max = tonumber(redis.call('HGET', KEYS[1], 'max') or '0')
local shown = tonumber(redis.call('HGET', KEYS[1], 'ls') or '0')
if seq >= shown then
  redis.call('HSET', KEYS[1], 'ls', seq, 'at', ARGV[2], 'sk', ARGV[3], 'last', ARGV[4])
end
if seq > max then
  redis.call('HSET', KEYS[1], 'max', seq)
  max = seq
end
if seq == max or seq >= shown then
  local _, seqs, cut = summary_parse(redis.call('GET', KEYS[2]))
  summary_write(KEYS[2], max, seqs, cut, tonumber(ARGV[5]), KEYS[1])
end
return 1
