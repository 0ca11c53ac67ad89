-- A bulk push's first step for many owners at once. KEYS: when ARGV[1] is '1' first the HBase
-- index's trust marker (cl:hbi:trusted: one Redis, where any key may be read), then per owner its
-- hash (cl:h:{u:<uid>}) and its HBase index flag (cl:hbi:{u:<uid>}). Returns the marker (when
-- asked), then per owner the cache generation (``_g``, false where the owner has no cached list)
-- and the flag (false where the owner has no HBase row). No burst counting (a bulk batch adds one
-- new peer per recipient). One call instead of one HGET per owner keeps the client from packing
-- and parsing a thousand commands per batch. On Redis Cluster its caller sends one call per slot
-- (redis_tier.probe_bulk), without the marker: an owner's two keys share its slot.
local out = {}
local first = 1
if ARGV[1] == '1' then
  out[1] = redis.call('GET', KEYS[1])
  first = 2
end
for i = first, #KEYS, 2 do
  out[#out + 1] = redis.call('HGET', KEYS[i], '_g')
  out[#out + 1] = redis.call('GET', KEYS[i + 1])
end
return out
