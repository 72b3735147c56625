-- acquire (the rest, after acquire.lua and the preludes its rare paths need): a lock held,
-- paused, shared or queued for, a retry whose reply was lost, and --once-per.
-- confirmed(record): a --once-per window's record says its run is running (no longer only
-- 'granted').
local RUNNING = 'running'
-- ARGV[15]: when a waiter's later attempt was sent, on the server's clock as the waiter reckons
-- it ('' for now): its entry's life counts from there (lapse_at, queue.lua).
local sent_ms = tonumber(ARGV[15] or '')
-- ARGV[16]: '1' when a replacer waits with --wait (it then queues as a replacer whatever the
-- holder; without --wait it waits only for a holder it asked).
local replacer_wait = ARGV[16] or ''
local function confirmed(record)
  redis.call('HSET', record, 'outcome', RUNNING)
end
-- A waiter's later attempt (one that waited: grant given) is never more than provisional:
-- it may run without its waiter (queued on the server behind a pop that timed out while the
-- waiter was frozen), so it renews only to the provisional lease, and the waiter's own
-- confirmation (extend.lua) makes it the full one.
local renew, provisional_flag = ARGV[2], 0
if grant ~= '' then renew, provisional_flag = grant, 1 end
if current == ARGV[1] then
  -- An earlier attempt landed but its reply was lost: ours, renewed (never shortened).
  if redis.call('PTTL', KEYS[1]) < tonumber(renew) then redis.call('PEXPIRE', KEYS[1], renew) end
  if every_text ~= '' and grant == '' and redis.call('HMGET', KEYS[13], 'token')[1] == ARGV[1] then
    confirmed(KEYS[13])
  end
  local h = holder_read(KEYS[3]) or ''
  return {1,
    tonumber(string.match(h, '\31fence=(%d+)')) or tonumber(redis.call('GET', KEYS[2])) or 0,
    tonumber(string.match(h, '\31started=(%d+)')) or now, -1, provisional_flag}
end
-- A waiter's own entry: a later replacer may have superseded it (--replace, below), and an
-- entry that lapsed is no place in the queue: the waiter joins again, at the back, as a
-- newcomer (--max-waiters applies), whether or not a script has swept the entry out yet.
-- A superseded replacer's mark, in the waiters hash in place of its entry's who.
local SUPERSEDED = 'superseded\31'
local joining = false
if ticket ~= '' then
  if replacer ~= '' then
    local mark = redis.call('HMGET', KEYS[7], ticket)[1]
    if mark and string.sub(mark, 1, #SUPERSEDED) == SUPERSEDED then
      redis.call('HDEL', KEYS[7], ticket)
      return {-3, string.sub(mark, #SUPERSEDED + 1)}
    end
  end
  local lapses = redis.call('ZSCORE', KEYS[6], ticket)
  if lapses and tonumber(lapses) <= now then
    redis.call('ZREM', KEYS[5], ticket)
    redis.call('ZREM', KEYS[6], ticket)
    redis.call('HDEL', KEYS[7], ticket)
    lapses = false
  end
  joining = not lapses
end
local head, queue_read = nil, false
local rare = shape ~= ''
if not rare then
  if found > 0 then
    head = redis.call('ZRANGE', KEYS[5], '0', '0')[1]
    rare = not (head and found == 1)
  end
  queue_read = true
end
local pause
if rare then
  pause = paused(KEYS[10], now)
  if pause then
    pause[7] = 'key'
  elseif KEYS[11] ~= KEYS[10] then
    pause = paused(KEYS[11], now)
    if pause then pause[7] = 'all' end
  end
end
local sharers, held_shape = 0, ''
if rare then
  sharers = sharers_live(KEYS[8], KEYS[9], now)
  if sharers > 0 then held_shape = redis.call('HMGET', KEYS[9], 'shape')[1] or '' end
end
if shape ~= '' then
  local mine = redis.call('ZSCORE', KEYS[8], ARGV[1])
  if mine then
    -- An earlier attempt landed but its reply was lost: ours, renewed (provisionally, for a
    -- waiter's later attempt, as above).
    redis.call('ZADD', KEYS[8], 'GT', now + tonumber(renew), ARGV[1])
    if every_text ~= '' and grant == '' and redis.call('HMGET', KEYS[13], 'token')[1] == ARGV[1] then
      confirmed(KEYS[13])
    end
    sharers_expire(KEYS[8], KEYS[9], now)
    local slot, fence, started = sharer(KEYS[9], ARGV[1])
    return {1, fence, started, slot, provisional_flag}
  end
  if held_shape ~= '' and held_shape ~= shape then return {-1, held_shape} end
end
-- Once per window (--once-per D): a run belongs to the boundary of the server's clock nearest
-- its start (window w covers w*D - D/2 .. w*D + D/2), so hosts whose clocks differ by up to D/4
-- firing the same schedule land in one window. The window's first taker records itself; a later
-- run of the same window is skipped, unless it may retry (--retry-failed) a run that failed,
-- timed out, lost its lease, or died without a release (still 'running' but no longer holding).
local every = tonumber(every_text)
local window
if every then
  window = math.floor((now + every / 2) / every)
  local r = redis.call('HMGET', KEYS[13], 'window', 'every', 'outcome', 'token',
    'host', 'pid', 'user', 'started', 'ended', 'exit')
  -- A window 'granted' to a waiter that has not confirmed it is not taken: while that grant
  -- lives the lock is busy anyway, and once it lapsed the window is the next run's.
  if tonumber(r[1]) == window and tonumber(r[2]) == every and r[3] ~= 'granted' then
    local outcome = r[3]
    if outcome == 'running' and current ~= r[4] then
      local deadline = tonumber(redis.call('ZSCORE', KEYS[8], r[4]))
      if not deadline or deadline <= now then outcome = 'vanished' end
    end
    local failed = outcome == 'failed' or outcome == 'killed' or outcome == 'timed out'
      or outcome == 'lease lost' or outcome == 'vanished' or outcome == 'replaced'
    if not (failed and retry_failed == '1') then
      counted('skipped', '')
      return {-2, window * every - math.floor(every / 2), every, r[5] or '', r[6] or '',
        r[7] or '', r[8] or '', r[9] or '', r[10] or '', outcome or ''}
    end
  end
end
local free = not current and sharers == 0
if shape == 'shared' then free = not current end
if shape ~= '' and shape ~= 'shared' then free = not current and sharers < tonumber(shape) end
if free and not pause then
  if not queue_read then head = redis.call('ZRANGE', KEYS[5], '0', '0')[1] end
  if head and head ~= ticket then
    head = live_head(now)
    -- Free, and someone else heads the queue: the front is put on notice (queue.lua).
    if head and head ~= ticket then notice(now, nil, false) end
  end
  if not head or head == ticket then
    local ttl = renew
    local provisional = provisional_flag == 1
    local fence, fence_text, fresh = new_fence(KEYS[2], us_text)
    if fresh then redis.call('PEXPIRE', KEYS[4], RETAIN) end
    local slot = -1
    if shape == '' then
      -- A replacer's grant names its ticket, so that a later replacer that asks it to stop
      -- supersedes it even if the grant lapses before it is confirmed (below).
      local mark = nil
      if provisional and replacer ~= '' then mark = ticket end
      write_holder(KEYS[3], ttl, now_text, fence_text, ARGV[4], ARGV[5], mark)
      -- Taken with a queue there: the release is to look at it (holder.lua's KEYS[3]:queued).
      if head then redis.call('SET', KEYS[3] .. ':queued', '1', 'PX', QUEUE_KEPT) end
      redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
    else
      if shape ~= 'shared' then slot = free_slot(KEYS[8], KEYS[9], tonumber(shape)) end
      local own = ''
      if slot >= 0 then own = slot end
      redis.call('HSET', KEYS[9], 'shape', shape,
        ARGV[1], string.format('%s\31%d\31%d\31%s\31%s', own, fence, now, ttl, waiting))
      redis.call('ZADD', KEYS[8], string.format('%d', now + tonumber(ttl)), ARGV[1])
      sharers_expire(KEYS[8], KEYS[9], now)
    end
    if every then
      local taken = RUNNING
      if provisional then taken = 'granted' end
      redis.call('HSET', KEYS[13], 'window', string.format('%d', window), 'every', every_text,
        'token', ARGV[1], 'fence', fence_text, 'started', now_text, 'outcome', taken, 'ended', '',
        'exit', '', unpack(ARGV, 17))
      redis.call('PEXPIRE', KEYS[13], string.format('%d', 2 * every))
    end
    -- A waiter's take says how long it waited, from its arrival in the queue (a replacer's
    -- was moved 2^52 back, see above), for `log` and its timeline.
    local who = ARGV[4]
    if head == ticket then
      local arrived = tonumber(redis.call('ZSCORE', KEYS[5], ticket))
      if arrived then
        if arrived < 0 then arrived = arrived + 4503599627370496 end
        local waited = math.floor((tonumber(us_text) - arrived) / 1000)
        if waited >= 0 then who = who .. string.format('\31waited_ms=%d', waited) end
      end
    end
    if shape == '' then
      audit(KEYS[12], now_text, 'acquired', 'fence=' .. fence_text .. '\31' .. who)
    elseif slot >= 0 then
      audit(KEYS[12], now, 'acquired',
        string.format('fence=%d\31shape=%s\31slot=%d\31%s', fence, shape, slot, who))
    else
      audit(KEYS[12], now, 'acquired',
        string.format('fence=%d\31shape=%s\31%s', fence, shape, who))
    end
    -- A quorum waiter (its arrival given) stays queued here until a majority granted it the
    -- lock (it then leaves every node's queue): taken out here alone, it would lose its place
    -- on this node whenever the other nodes refused it, and two waiters could take turns at
    -- heading different nodes for ever.
    if head and arrival == '' then
      redis.call('ZREM', KEYS[5], ticket)
      redis.call('ZREM', KEYS[6], ticket)
      redis.call('HDEL', KEYS[7], ticket)
      -- A shared taker leaves room: the next waiter may be one too.
      if shape ~= '' then wake() end
    end
    if provisional then return {1, fence, now, slot, 1} end
    return {1, fence, now, slot, 0}
  end
end
local pttl = redis.call('PTTL', KEYS[1])
if pttl == -2 and sharers > 0 then
  local first = redis.call('ZRANGE', KEYS[8], '0', '0', 'WITHSCORES')
  pttl = math.max(tonumber(first[2]) - now, 0)
end
if pause then counted('busy', 'reason=paused\31') else counted('busy', '') end
local ahead, full = 0, 0
-- --max-waiters N: a waiter not yet queued joins only while fewer than N live entries (not
-- lapsed: a frozen waiter counts until its entry does) are queued.
if ticket ~= '' and max_waiters ~= '' and joining then
  -- ZRANGEBYSCORE, which the queue already needs, rather than ZCOUNT, which a least-privilege
  -- user may not be granted; at most N entries are read.
  local queued = #redis.call('ZRANGEBYSCORE', KEYS[6], '(' .. now_text, '+inf', 'LIMIT', '0', max_waiters)
  if queued >= tonumber(max_waiters) then
    ticket, full = '', queued
  end
end
-- The holder record, for the reply (false when none).
if brief == nil then brief = holder_read(KEYS[3]) or false end
-- A replacer kept out of a full queue does not run, so it asks nobody to stop.
local replacing = 0
if replacer ~= '' and current and not pause and full == 0 then
  local h = brief or ''
  local r = {string.match(h, '\31fence=([^\31]*)'), string.match(h, '\31replace=([^\31]*)'),
    string.match(h, '\31stop=([^\31]*)'), string.match(h, '\31ticket=([^\31]*)')}
  if r[1] and r[2] ~= 'no' then
    replacing = 1
    -- The holder is an earlier replacer's unconfirmed grant: it is superseded, whether it
    -- confirms in time (its confirmation finds the request) or not (its next attempt finds
    -- the mark).
    if r[4] then
      redis.call('HSET', KEYS[7], r[4], SUPERSEDED .. replacer)
      redis.call('PEXPIRE', KEYS[7], QUEUE_KEPT)
    end
    if not r[3] then
      holder_update(KEYS[3], holder_with(h, 'stop', replacer))
      local stop = KEYS[14] .. ':' .. r[1]
      redis.call('LPUSH', stop, replacer)
      redis.call('PEXPIRE', stop, string.format('%d', math.max(pttl, 1000)))
      audit(KEYS[12], now, 'replacing', 'fence=' .. r[1] .. '\31' .. ARGV[4])
    end
  end
end
-- A replacer that waits — with --wait, or for the holder it asked — queues ahead of every
-- plain waiter, and the last one to arrive is the one that runs: joining, it supersedes every
-- earlier replacer still waiting (at negative scores). Each is taken out of the queue, marked
-- in the waiters hash, and woken, so that its next attempt ends its wait at once (-3, above).
local replacer_waits = replacer ~= '' and ticket ~= '' and (replacer_wait == '1' or replacing == 1)
if replacer_waits and joining then
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', '(0')) do
    if w ~= ticket then
      redis.call('ZREM', KEYS[5], w)
      redis.call('ZREM', KEYS[6], w)
      redis.call('HSET', KEYS[7], w, SUPERSEDED .. replacer)
      local wake_up = KEYS[5] .. ':' .. w
      redis.call('LPUSH', wake_up, '1')
      redis.call('PEXPIRE', wake_up, '2000')
    end
  end
end
local life = 0
if ticket ~= '' then
  local at = arrival
  if at == '' then at = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2])) end
  if replacer_waits then at = string.format('%d', tonumber(at) - 4503599627370496) end
  redis.call('ZADD', KEYS[5], 'NX', at, ticket)
  ahead = redis.call('ZRANK', KEYS[5], ticket)
  -- An entry lives QUEUE_LIFE unrefreshed at the front of a lock that is free (the waiters
  -- there try again at that pace), ten times as long elsewhere (queue.lua).
  life = QUEUE_FAR_LIFE
  if free and not pause and ahead < QUEUE_NEAR then life = QUEUE_LIFE end
  redis.call('ZADD', KEYS[6], string.format('%d', lapse_at(now, life, sent_ms)), ticket)
  redis.call('HSETNX', KEYS[7], ticket, now_text .. '\31' .. waiting)
  for i = 5, 7 do redis.call('PEXPIRE', KEYS[i], QUEUE_KEPT) end
  -- Someone queued behind the holder: its release is to look at the queue (holder.lua's
  -- KEYS[3]:queued, kept as long as the queue's keys).
  redis.call('SET', KEYS[3] .. ':queued', '1', 'PX', QUEUE_KEPT)
end
return {0, pttl, now, brief, ahead, redis.call('ZCARD', KEYS[5]), held_shape, sharers,
  pause or false, full, replacing, 0, 0, life}
