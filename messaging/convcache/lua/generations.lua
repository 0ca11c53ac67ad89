-- A bulk push's first step for many owners at once: the cache generation (``_g``) of each
-- owner's hash in KEYS (cl:h:{u:<uid>}), false where the owner has no cached list. No burst
-- counting (a bulk batch adds one new peer per recipient). One call instead of one HGET per owner
-- keeps the client from packing and parsing a thousand commands per batch. On Redis Cluster its
-- caller sends one call per slot (redis_tier._generations), so its KEYS share one slot.
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('HGET', KEYS[i], '_g')
end
return out
