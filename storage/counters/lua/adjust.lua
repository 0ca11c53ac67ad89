-- Set or change one conversation's unread count, keeping the totals equal to their parts.
-- KEYS[1] unread hash; ARGV[1] peer, ARGV[2] category, ARGV[3] 'set' | 'add', ARGV[4] n.
-- The count never goes below zero, and the conversation's whole count is filed under ARGV[2]
-- (``k:`` remembers where it was filed, so a conversation that changed category moves its count).
-- Returns the conversation's new count.
--#include _set_count.lua
local key = KEYS[1]
local category = ARGV[2]
local old = tonumber(redis.call('HGET', key, 'p:' .. ARGV[1]) or '0')
local old_category = redis.call('HGET', key, 'k:' .. ARGV[1]) or category
local new = tonumber(ARGV[4])
if ARGV[3] == 'add' then new = old + new end
if new < 0 then new = 0 end
set_count(key, ARGV[1], old_category, category, old, new)
return new
