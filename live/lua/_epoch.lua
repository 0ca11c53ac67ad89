-- The epoch of one user's live log, included by append.lua and connect.lua (``--#include``,
-- infra/luascripts.py). The epoch moves on when the log is gone or when this Redis restarted
-- since it was written (INFO's run_id, ~6 us): AOF everysec may have lost its last second, and
-- the positions after what survived are written again, so a cursor of the old epoch is good only
-- up to ``floor``. Returns the epoch, the epoch before a restart ('' for none) and ``floor``.
local run = string.match(redis.call('INFO', 'server'), 'run_id:(%x+)')
local function epoch_of(meta, log, fresh)
  local found = redis.call('HMGET', meta, 'epoch', 'run', 'prev', 'floor', 'pos')
  if found[1] and found[2] == run then
    return found[1], found[3] or '', tonumber(found[4] or 0)
  end
  local prev, floor = '', 0
  if found[1] then
    prev, floor = found[1], tonumber(found[5] or 0)
  else
    redis.call('DEL', log)
  end
  redis.call('HSET', meta, 'epoch', fresh, 'run', run, 'prev', prev, 'floor', floor, 'pos', floor)
  return fresh, prev, floor
end
