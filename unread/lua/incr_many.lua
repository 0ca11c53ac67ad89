-- Count one new message from one peer for many owners, at most once per marker.
-- KEYS[1]   marker key ('' slot ignored when ARGV[4] == '0'); KEYS[2..] unread hashes of owners.
-- ARGV[1] peer uid, ARGV[2] category, ARGV[3] delta, ARGV[4] '1' to honour the marker,
-- ARGV[5] marker ttl seconds.
-- Returns the number of owners changed (0 when the marker says it was already applied).
if ARGV[4] == '1' then
  if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[5]) then
    return 0
  end
end
local peer_field = 'p:' .. ARGV[1]
local cat_field = 'c:' .. ARGV[2]
local delta = tonumber(ARGV[3])
for i = 2, #KEYS do
  redis.call('HINCRBY', KEYS[i], peer_field, delta)
  redis.call('HINCRBY', KEYS[i], cat_field, delta)
  redis.call('HINCRBY', KEYS[i], 't', delta)
end
return #KEYS - 1
