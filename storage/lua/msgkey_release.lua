-- KEYS[1] lease key, KEYS[2] high-water key; ARGV[1] token, ARGV[2] last ms issued.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2])
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
