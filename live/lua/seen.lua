-- Which of these users were seen within the resume window: KEYS their ``seen`` keys (one slot;
-- on a cluster the groups of one primary run in one call, infra.luascripts.call_by_slot).
-- Returns each key's value (false when absent), in KEYS order.
return redis.call('MGET', unpack(KEYS))
