--#include _common.lua
-- A bulk push's first step for many owners at once. KEYS: when ARGV[1] is '1' first the HBase
-- index's trust marker (cl:hbi:trusted: one Redis, where any key may be read), then per owner its
-- hash (cl:h:{u:<uid>}) and its HBase index flag (cl:hbi:{u:<uid>}). Returns the marker (when
-- asked), then only for the owners that have a cached list or an HBase flag: the owner's position
-- (0-based, in KEYS order), its cache generation (``_g``, false without a cached list) and its
-- flag (false without an HBase row). A bulk batch's owners mostly have neither, so the reply is
-- short (4,000 owners: ~8,000 nil replies fewer to encode and parse). No burst counting (a bulk
-- batch adds one new peer per recipient). On Redis Cluster its caller sends one call per primary
-- over the owners of all its slots (redis_tier.probe_bulk, infra.luascripts.read_by_node),
-- without the marker. It writes nothing, which is what lets it run that way.
local out = {}
local first = 1
if ARGV[1] == '1' then
  out[1] = redis.call('GET', KEYS[1])
  first = 2
end
for i = first, #KEYS, 2 do
  local gen = redis.call('HGET', KEYS[i], '_g')
  local flag = redis.call('GET', KEYS[i + 1])
  if gen or flag then
    out[#out + 1] = (i - first) / 2
    out[#out + 1] = gen
    out[#out + 1] = flag
  end
end
return out
