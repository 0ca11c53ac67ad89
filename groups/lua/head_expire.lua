-- Retention removed a group's messages up to a seq: KEYS[1] ghead:{g:<gid>}. ARGV: that seq.
-- The head stops showing its last message when that one went (``ls`` at or below the seq); a
-- newer send, or one sent meanwhile, keeps its place. Idempotent.
local shown = tonumber(redis.call('HGET', KEYS[1], 'ls') or '-1')
if shown >= 0 and shown <= tonumber(ARGV[1]) then
  return redis.call('HDEL', KEYS[1], 'last')
end
return 0
