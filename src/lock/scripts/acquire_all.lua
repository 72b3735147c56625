-- acquire_all: take several locks at once, all or none (`--key A --key B …`), in one round
-- trip. Every lock is read before any is written: if each is free (or already ours) and this
-- taker heads each queue that has a live head, all are taken; otherwise none is (one already
-- ours from an earlier attempt is given back) and a waiter joins every lock's queue with one
-- arrival. Exclusive holds only (the callers refuse shapes and --once-per with several keys).
-- Why waiting this way never deadlocks nor starves: docs/design.md, "Several keys".
-- KEYS: for each lock in turn, the 12 keys acquire.lua takes from every run (KEYS[1..12]).
-- ARGV[1] token   ARGV[2] ttl (ms)   ARGV[3] '1' to count a busy refusal   ARGV[4] '' (unused:
-- the records' retention is audit.lua's RETAIN)   ARGV[5] the waiter's ticket ('' when not
-- waiting)   ARGV[6] its arrival ('' for the server's clock in µs)   ARGV[7] who waits
-- (record.rs writes it; '' when not waiting)
-- ARGV[8], ARGV[10], ARGV[11], ARGV[14] '' (unused: exclusive holds only, no --once-per,
-- --max-waiters or --replace with several keys)   ARGV[9] n, the number of locks
-- ARGV[12] the provisional lease (ms) a waiter's later attempt is granted ('' for the first
--         attempt, which takes the locks outright)
-- ARGV[15] when a waiter's later attempt was sent, on the server's clock as the waiter reckons
--         it ('' for now): its entries' life counts from there (lapse_at, queue.lua)
-- ARGV[13] who takes it, as the audit log writes it; each holder record keeps it, with
-- replace=no (a run over several keys is never asked to stop)
-- ARGV[16..15+n] each lock's release channel
-- Reply: {1, fence of the first lock, server time (ms), -1, 1 when the grant is provisional,
--         the fence of every other lock in order} when taken;
--        {0, then acquire.lua's refusal from pttl to replacing (full and replacing 0) for the
--         first lock that refused, its position (1..n), 1 when this waiter is at the front of
--         another of its locks that is free (it must refresh its entry there at the front's
--         pace), the shortest life (ms) its entries were given (0: not queued)} when refused.
-- The server's TIME as text, in ms and in µs (see acquire.lua).
local t = redis.call('TIME')
local us_text = t[2]
if #us_text < 6 then us_text = string.sub('00000' .. us_text, -6) end
local now_text = t[1] .. string.sub(us_text, 1, 3)
us_text = t[1] .. us_text
local now = tonumber(now_text)
local token, ticket, n = ARGV[1], ARGV[5], tonumber(ARGV[9])
local function key(i, j) return KEYS[(i - 1) * 12 + j] end
-- Every lock is read first: nothing is taken until all can be. And before anything is written
-- (a lapsed waiter swept out, a busy refusal counted, a lock taken), the records of another
-- layout are refused (LAYOUT, as holder_read and counter_refusal word it): a held lock's
-- holder record, and every lock's fence counter, which new_fence would meet only after the locks
-- before it were taken. A take of one lock pays nothing for this: acquire.lua reads its
-- counter with the SET … GET that draws the fence, and its holder record before it writes.
local locks, blocked, headed = {}, nil, false
for i = 1, n do
  local current = redis.call('GET', key(i, 1))
  local l = {current = current, ours = current == token}
  if current then l.record = holder_read(key(i, 3)) or false end
  -- Another type of value there is new_fence's to report, as for one lock.
  local counter = redis.pcall('GET', key(i, 2))
  if type(counter) == 'string' then
    local refusal = counter_refusal(key(i, 2), counter)
    if refusal then error(refusal) end
  end
  locks[i] = l
end
for i = 1, n do
  local l = locks[i]
  l.q = queue_for({unpack(KEYS, (i - 1) * 12 + 1, i * 12)})
  local current = l.current
  if not l.ours then
    l.pause = paused(key(i, 10), now)
    if l.pause then
      l.pause[7] = 'key'
    elseif key(i, 11) ~= key(i, 10) then
      l.pause = paused(key(i, 11), now)
      if l.pause then l.pause[7] = 'all' end
    end
    l.sharers = sharers_live(key(i, 8), key(i, 9), now)
    l.free = not current and l.sharers == 0 and not l.pause
    local head = redis.call('ZRANGE', key(i, 5), '0', '0')[1]
    if head and head ~= ticket then head = l.q.live_head(now) end
    -- Free, and someone else heads the queue: the front is put on notice (queue.lua).
    if l.free and head and head ~= ticket then l.q.notice(now, ARGV[15 + i], false) end
    l.refuses = not l.free or (head ~= nil and head ~= ticket)
    if l.refuses and not blocked then blocked = i end
    if head ~= nil and head == ticket then headed = true end
    l.queued = head ~= nil
  end
end
if not blocked then
  -- A waiter's later attempt (grant given) is granted provisionally, as in acquire_rest.lua.
  local provisional = ARGV[12] ~= ''
  local ttl = ARGV[2]
  if provisional then ttl = ARGV[12] end
  local fences = {}
  for i = 1, n do
    if locks[i].ours then
      -- An earlier attempt landed but its reply was lost: ours, renewed.
      redis.call('PEXPIRE', key(i, 1), ttl)
      fences[i] = tonumber(string.match(locks[i].record or '', '\31fence=(%d+)'))
        or tonumber(redis.call('GET', key(i, 2))) or 0
    else
      local fence, fence_text, fresh = new_fence(key(i, 2), us_text)
      if fresh then redis.call('PEXPIRE', key(i, 4), RETAIN) end
      write_holder(key(i, 3), ttl, now_text, fence_text, ARGV[13], 'no')
      -- Taken with a queue there: the release is to look at it (holder.lua's RECORD:queued).
      if locks[i].queued then
        redis.call('SET', key(i, 3) .. ':queued', '1', 'PX', locks[i].q.KEPT)
      end
      redis.call('SET', key(i, 1), token, 'PX', ttl)
      audit(key(i, 12), now_text, 'acquired', 'fence=' .. fence_text .. '\31' .. ARGV[13])
      fences[i] = fence
    end
    -- A quorum waiter stays queued until a majority granted it every lock (as in acquire.lua).
    if ticket ~= '' and ARGV[6] == '' then
      redis.call('ZREM', key(i, 5), ticket)
      redis.call('ZREM', key(i, 6), ticket)
      redis.call('HDEL', key(i, 7), ticket)
    end
  end
  local reply = {1, fences[1], now, -1, 0}
  if provisional then reply[5] = 1 end
  for i = 2, n do reply[i + 4] = fences[i] end
  return reply
end
-- Refused: none stays taken. A lock still ours from an earlier attempt is given back.
for i = 1, n do
  if locks[i].ours then redis.call('DEL', key(i, 1), key(i, 3)) end
end
local b = locks[blocked]
local pttl = redis.call('PTTL', key(blocked, 1))
if pttl == -2 and b.sharers > 0 then
  local first = redis.call('ZRANGE', key(blocked, 8), '0', '0', 'WITHSCORES')
  pttl = math.max(tonumber(first[2]) - now, 0)
end
local held_shape = ''
if b.sharers > 0 then held_shape = redis.call('HMGET', key(blocked, 9), 'shape')[1] or '' end
if ARGV[3] == '1' then
  for i = 1, n do
    if locks[i].refuses then
      redis.call('HINCRBY', key(i, 4), 'busy', '1')
      redis.call('PEXPIRE', key(i, 4), RETAIN)
      if locks[i].pause then
        audit(key(i, 12), now, 'busy', 'reason=paused\31' .. ARGV[13])
      else
        audit(key(i, 12), now, 'busy', ARGV[13])
      end
    end
  end
end
local ahead, queued, hurry, shortest = 0, 0, 0, nil
if ticket ~= '' then
  -- One arrival in every queue, so that two waiters stand in the same order in each queue
  -- they share: the host's clock in a quorum (ARGV[6]); on one server the earliest this
  -- waiter already has in any of them, else the server's clock.
  local arrival = ARGV[6]
  if arrival == '' then
    for i = 1, n do
      local s = redis.call('ZSCORE', key(i, 5), ticket)
      if s and (arrival == '' or tonumber(s) < tonumber(arrival)) then arrival = s end
    end
    if arrival == '' then
      arrival = string.format('%d', tonumber(t[1]) * 1000000 + tonumber(t[2]))
    end
  end
  for i = 1, n do
    local q = locks[i].q
    redis.call('ZADD', key(i, 5), arrival, ticket)
    local rank = redis.call('ZRANK', key(i, 5), ticket)
    -- At the front of a free lock the entry lives QUEUE_LIFE, and the waiter must try again
    -- at that pace even while another of its locks is held (queue.lua).
    local life = q.FAR_LIFE
    if locks[i].free and rank < q.NEAR then
      life = q.LIFE
      if i ~= blocked then hurry = 1 end
    end
    if not shortest or life < shortest then shortest = life end
    redis.call('ZADD', key(i, 6), string.format('%d', q.lapse_at(now, life, tonumber(ARGV[15]))),
      ticket)
    redis.call('HSETNX', key(i, 7), ticket, now_text .. '\31' .. ARGV[7])
    for j = 5, 7 do redis.call('PEXPIRE', key(i, j), q.KEPT) end
    -- Someone queued behind the holder (see holder.lua's RECORD:queued).
    redis.call('SET', key(i, 3) .. ':queued', '1', 'PX', q.KEPT)
    if i == blocked then ahead = rank end
  end
  queued = redis.call('ZCARD', key(blocked, 5))
else
  queued = redis.call('ZCARD', key(blocked, 5))
end
-- The holder record, for the reply: read above when the lock is held (false when none).
local brief = b.record
if brief == nil then brief = holder_read(key(blocked, 3)) or false end
return {0, pttl, now, brief, ahead, queued, held_shape, b.sharers, b.pause or false, 0, 0, blocked,
  hurry, shortest or 0}
