-- Append one delivery event per receiver to one stream shard, in one round trip.
-- KEYS[1] stream; ARGV[1] approximate max length, ARGV[2] peer uid, ARGV[3] msgkey,
-- ARGV[4..] receiver uids. Returns the number of events appended.
for i = 4, #ARGV do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*',
             'uid', ARGV[i], 'peer', ARGV[2], 'msgkey', ARGV[3])
end
return #ARGV - 3
