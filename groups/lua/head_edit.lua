-- A message's content changed (an edit made in SQL, followed from the binlog): KEYS[1]
-- ghead:{g:<gid>}. ARGV: seq, its new summary JSON. Only a head whose last message is that seq
-- shows it; without a head nothing (a head rebuilt from MySQL reads the new content).
if redis.call('HGET', KEYS[1], 'ls') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'last', ARGV[2])
return 1
