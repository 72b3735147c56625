-- acquire: take the lock if it is free (or already ours) and nobody is queued ahead, in one
-- round trip; a waiter that is refused joins (or stays in) the key's queue.
-- KEYS[1] lock (string: the token)    KEYS[2] fence counter    KEYS[3] holder record (string,
--         see holder.lua)
-- KEYS[4] counters (hash)   KEYS[5] queue (zset: ticket -> arrival)
-- KEYS[6] queue liveness (zset: ticket -> deadline, ms)   KEYS[7] waiters (hash: ticket -> who)
-- KEYS[8] shared leases (zset: token -> lease deadline, ms)
-- KEYS[9] shared holders (hash: 'shape' -> 'shared' | N; token -> the holder, see shapes.lua)
-- KEYS[10] the lock's pause record (hash)   KEYS[11] the prefix-wide pause record (hash; the same
--         key as KEYS[10] where it cannot share the lock's slot)
-- KEYS[12] the audit log (a list; see audit.lua): a take, a counted busy refusal and a skip
--         (--once-per) are logged
-- KEYS[13] the record of the current --once-per window (hash; see below)   KEYS[14] the holders'
--         stop lists, named KEYS[14]:FENCE (a list each; see below): given by a run with
--         --once-per or --replace only
-- ARGV[1] token   ARGV[2] ttl (ms)   ARGV[3] '1' to count a busy refusal
-- ARGV[4] who takes it, as the audit log writes it (name=value pairs; record.rs writes them);
--         the holder record keeps them among its fields
-- ARGV[5] 'no' when --replace may not ask this holder to stop (--no-replace, `redlock
--         acquire`), '' (or none) otherwise
-- ARGV[6..16], given by a run that waits, shares, runs once per window or replaces (none
-- otherwise, which is read as ''):
-- ARGV[6] the waiter's ticket ('' when not waiting)   ARGV[7] its arrival ('' for the server's
--         clock in µs)   ARGV[8] who waits or holds a shared lease (record.rs writes it; ''
--         when neither)
-- ARGV[9] the shape: '' exclusive (the lock key), 'shared', or a number of slots (>= 2)
-- ARGV[10] --once-per's window length (ms; '' without it)   ARGV[11] '1' with --retry-failed
-- ARGV[12] the provisional lease (ms) a waiter's later attempt is granted ('' for a first
--          attempt, which takes a free lock outright; see below)
-- ARGV[13] --max-waiters N: a waiter joins the queue only while fewer than N live entries are
--          queued ('' for no limit; one already queued keeps its place while its entry lives)
-- ARGV[14] --replace: who asks the holder to stop, as its redlock reports it ('' when not
--          replacing; see below)
-- ARGV[15] when a waiter's later attempt was sent, on the server's clock as the waiter reckons
--          it ('' for now): its entry's life counts from there (queue.lua, lapse_at)
-- ARGV[16] '1' when a replacer waits with --wait ('' otherwise; given with --once-per or
--          --replace)
-- ARGV[17..] (--once-per) the holder's identity as field/value pairs (record.rs writes them),
--          for the window's record
-- The holder record is holder.lua's. The release channel is the queue's key with
-- 'released' for 'queue' (`{L}:redlock:released`).
-- The retention of the records (RETAIN) is audit.lua's.
-- Reply: {1, fence, server time (ms), slot (-1: none), 1 when the lease is provisional} when
--        taken;
--        {0, pttl (ms; -2 when free but others are queued), server time (ms),
--         the holder record (false when none), waiters ahead of us, queue length,
--         shared holders' shape ('' when none), shared holders, pause, full} when refused
--        (the holder record as it is kept, see holder.lua; pause: false, or
--        {host, pid, user, reason, since, until, scope} of the pause in force, the fields
--        record::PAUSE_BRIEF names, scope 'key' or 'all'; full: 0, or how many wait when
--        --max-waiters kept this waiter out of a full queue; replacing: 1 when the holder
--        was asked to stop (now or before), 0 otherwise; then 0, 0 (acquire_all.lua's
--        fields) and the life (ms) this waiter's entry was given, 0 when not queued);
--        {-1, the shape the key is held with} when a shared taker asks for another shape;
--        {-2, window start (ms), window length (ms), host, pid, user, started, ended, exit,
--         outcome} when --once-per finds this window's run already taken (see below);
--        {-3, who} when a later replacer superseded this waiting one (--replace, below).
--        {-4} to a lean call (a plain run's, below) that the common paths do not serve.
-- A paused key refuses every taker but its holder's own retry; a waiter stays queued.
-- A waiter's later attempt is granted a provisional lease (ARGV[12]), which only its own
-- confirmation (extend.lua) makes the full one: the grant may be made while the waiter cannot
-- act on it (its attempt waits on the server behind its grant list, and its host died or it
-- was frozen meanwhile), and a dead waiter must not hold the queue for a whole TTL. Its
-- --once-per window is 'granted' until then: not taken while the grant is unconfirmed. A
-- waiter's entry that lapsed is no place in the queue: its next attempt joins at the back.
-- --replace (ARGV[14]): a refused replacer asks the exclusive holder to stop, once per holder:
-- the holder record gets 'stop' (who asked), which the holder's renewals then refuse
-- (extend.lua), and who asked is pushed to the holder's stop list, on which its heartbeat waits
-- between renewals, so it learns at once. A holder whose record says replace=no (--no-replace,
-- `redlock acquire`), one without a record (a foreign client), shared or slotted holders, and a
-- paused key are not asked: the replacer is a plain busy run. A replacer that waits (--wait,
-- or for a holder it asked or found asked) queues ahead of every plain waiter: its arrival is
-- moved 2^52 back (scores stay exact doubles). The last replacer to arrive runs: one that
-- joins supersedes the replacers queued before it, which end their wait (-3). A replacer kept
-- out of a full queue (--max-waiters) asks nobody.
-- The server's TIME as text, in ms and in µs (the floor of a fence), made from its digits: a
-- number converted from or to text costs the server more than most commands do.
local t = redis.call('TIME')
local us_text = t[2]
if #us_text < 6 then us_text = string.sub('00000' .. us_text, -6) end
local now_text = t[1] .. string.sub(us_text, 1, 3)
us_text = t[1] .. us_text
-- A rare run (one that waits, shares, runs once per window or replaces) sends ARGV[6..16]; a
-- plain run sends none, and is all the common paths below serve.
local rare = ARGV[6] ~= nil
-- The lock key, pauses, shared holders and waiters: a free lock finds none of them, in the
-- common case, with one EXISTS, and the script looks closer only at what is there. The queue is
-- counted in it, so a free lock with nobody queued needs no look at the queue; a queue that is
-- the only key there (one found besides the lock, and it has a head) is nothing rare.
-- A plain run names only the keys the common paths touch (a lean call: lock, fence counter,
-- holder record, counters, queue, shared leases, pause records, audit log, KEYS[1..9]), since
-- each key a script is given costs the server; the rest needs them all, and replies {-4} to a
-- lean call, which the caller sends again with every key (a plain run that finds a queue, a
-- pause or a shared holder pays a round trip more).
local log_key = KEYS[12]
local found
if log_key then
  found = redis.call('EXISTS', KEYS[1], KEYS[8], KEYS[10], KEYS[11], KEYS[5])
else
  log_key = KEYS[9]
  found = redis.call('EXISTS', KEYS[1], KEYS[6], KEYS[7], KEYS[8], KEYS[5])
end
local current = false
if found > 0 then
  current = redis.call('GET', KEYS[1])
  if current then found = found - 1 end
end
-- The common run, a free lock with nothing else there (no pause, shared holder nor queue),
-- taken whole by a plain run, ends here: the functions the rest needs (acquire_rest.lua,
-- and the preludes in front of it) are defined only by a run that goes on, since each
-- function a script defines costs the server on every call that reaches its definition.
-- The take is taking.lua's new_fence and write_holder written out (they are defined after this
-- point, for the rest; keep the two alike).
if found == 0 and not current and not rare then
  local fence_text = us_text
  local old = redis.pcall('SET', KEYS[2], fence_text, 'PX', RETAIN, 'GET')
  if type(old) == 'table' then
    old = redis.call('GET', KEYS[2])
    if not old or (#old == #fence_text and old < fence_text) then
      redis.call('SET', KEYS[2], fence_text, 'PX', RETAIN)
    end
  end
  if old and (#old ~= #fence_text or old >= fence_text) then
    if not string.find(old, '^%d+$') then
      redis.call('SET', KEYS[2], old, 'KEEPTTL')
      error({err = 'LAYOUT the fence counter ' .. KEYS[2] .. ' is ' .. old ..
        ', not of data layout ' .. LAYOUT .. ': written by another redlock; nothing was taken'})
    end
    -- A fence stays below 2^53 (JSON readers keep it exact): a counter at its end was set by
    -- hand, and the next fence would be no larger than it.
    if #old > 16 or (#old == 16 and old >= '9007199254740991') then
      redis.call('SET', KEYS[2], old, 'KEEPTTL')
      error({err = 'LAYOUT the fence counter ' .. KEYS[2] .. ' is ' .. old ..
        ', at the end of the fences redlock hands out (below 2^53): set by hand, it cannot ' ..
        'grow; nothing was taken'})
    end
    if tonumber(old) >= tonumber(fence_text) then
      fence_text = string.format('%d', tonumber(old) + 1)
      redis.call('SET', KEYS[2], fence_text, 'PX', RETAIN)
    end
  end
  local fresh = not old or #old ~= #fence_text
    or string.sub(old, 1, 5) ~= string.sub(fence_text, 1, 5)
  local record = 'v=' .. LAYOUT .. '\31started=' .. now_text .. '\31ttl=' .. ARGV[2] ..
    '\31fence=' .. fence_text .. '\31' .. ARGV[4]
  if ARGV[5] == 'no' then record = record .. '\31replace=no' end
  redis.call('SET', KEYS[3], record, 'PX', ARGV[2])
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  local n = redis.call('RPUSH', log_key,
    now_text .. '\31acquired\31fence=' .. fence_text .. '\31' .. ARGV[4])
  if fresh or n % 32 == 0 or n == 1 then
    audit(log_key, now_text, 'acquired', nil, fresh, nil, n)
  end
  if fresh then redis.call('PEXPIRE', KEYS[4], RETAIN) end
  return {1, fence_text, now_text, -1, 0}
end
