-- KEYS[1] a delivery stream, KEYS[2] its hash {consumer group: entries trimmed before it read them}.
-- ARGV[1] MAXLEN, ARGV[2] TRIM_STEP, ARGV[3..] the entry's field/value pairs. Returns the entry id.
-- XADD, then, once the stream is TRIM_STEP entries past MAXLEN, trim it like MAXLEN ~ (whole
-- nodes) and count, per group, what the trim took that the group had not read.
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
if redis.call('XLEN', KEYS[1]) <= tonumber(ARGV[1]) + tonumber(ARGV[2]) then
  return id
end
local groups = redis.call('XINFO', 'GROUPS', KEYS[1])
local trimmed = redis.call('XTRIM', KEYS[1], 'MAXLEN', '~', ARGV[1])
if trimmed == 0 or #groups == 0 then
  return id
end
local left = redis.call('XLEN', KEYS[1])
local added = nil
for _, flat in ipairs(groups) do
  local group = {}
  for i = 1, #flat, 2 do group[flat[i]] = flat[i + 1] end
  -- lag (read before the trim) counts the group's unread entries, trimmed ones included: what
  -- exceeds what is left was unread and is gone (at most this trim's entries). No lag (Redis
  -- cannot tell): not counted.
  local lost = group['lag'] and math.min(trimmed, group['lag'] - left) or 0
  if lost > 0 then
    redis.call('HINCRBY', KEYS[2], group['name'], lost)
    -- Redis 7.0 would keep counting the lost entries in the group's lag for ever: re-anchor its
    -- entries-read so that its lag is the entries left (its last-delivered id is kept).
    if not added then
      local info = redis.call('XINFO', 'STREAM', KEYS[1])
      for i = 1, #info, 2 do
        if info[i] == 'entries-added' then added = info[i + 1] end
      end
    end
    redis.call('XGROUP', 'SETID', KEYS[1], group['name'], group['last-delivered-id'],
      'ENTRIESREAD', added - left)
  end
end
return id
