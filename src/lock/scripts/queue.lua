-- queue (put in front of acquire, release, force_release, leave and resume; KEYS[5..7] as in
-- acquire.lua): the waiters' queue, shared.
-- The front of the queue, the first QUEUE_NEAR waiters, is what a free lock waits on. A waiter
-- keeps its entry by trying again; an entry not refreshed in time lapses, and live_head skips
-- it. While the lock is held or paused an entry lives QUEUE_FAR_LIFE (15 s) unrefreshed and its
-- waiter tries again every 5 s, at its lock's expiry (at the front), or when woken: a queue of
-- a thousand costs the server little. When the lock comes free (notice, below) the front's
-- entries live QUEUE_LIFE (1.5 s) and their waiters try every 0.5 s, so a dead waiter at the
-- front holds the queue up by at most 2 s. lock/mod.rs names the same figures.
local QUEUE_NEAR, QUEUE_LIFE, QUEUE_FAR_LIFE = 3, 1500, 15000
-- The queue's keys are kept twice as long as an entry lives.
local QUEUE_KEPT = '30000'
-- live_head(now): the head of the queue, after skipping (and removing) waiters that stopped
-- refreshing their entry (killed, cut off). now: the server's clock in ms.
local function live_head(now)
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[6], '-inf', string.format('%d', now))) do
    redis.call('ZREM', KEYS[5], w)
    redis.call('ZREM', KEYS[6], w)
    redis.call('HDEL', KEYS[7], w)
  end
  return redis.call('ZRANGE', KEYS[5], '0', '0')[1]
end
-- lapse_at(now, life, sent): when an entry refreshed now lapses unless refreshed again: `life`
-- after its attempt was sent (sent: the server's clock at the send, as the waiter reckons it
-- from the reply before; nil for now). An attempt queued on the server behind a blocking pop
-- runs when the pop times out even if its waiter is frozen, and must not keep the waiter's
-- entry for that block and a whole life more; the entry never lapses sooner than QUEUE_LIFE
-- from now, which a living waiter's next attempt always beats.
local function lapse_at(now, life, sent)
  if sent and sent < now then return math.max(sent + life, now + QUEUE_LIFE) end
  return now + life
end
-- notice(now, channel, woken): the lock is free, and the front of the queue is put on notice:
-- each of its entries that would live longer lapses QUEUE_LIFE from now unless refreshed, and
-- its waiter is woken (a push to its grant list, KEYS[5]:TICKET in the lock's hash slot: a
-- waiter on one server keeps its next attempt queued on the server behind a blocking pop of
-- that list, so the server runs it right after this script; the list lives 2 s unless popped).
-- The head takes the lock; the others learn they are at the front of a free lock and try again
-- every 0.5 s, so a head that does not take it (dead) is skipped within 2 s. The head is also
-- woken on its own channel (a waiter in a quorum or on a cluster listens there), and, with
-- `woken`, even when already on notice (a release); without, an entry already on notice is
-- left alone, so that waiters trying at the front do not wake one another for ever. channel:
-- the lock's release channel; nil for the one named after KEYS[5] (`{L}:redlock:released`).
local function notice(now, channel, woken)
  local cutoff = now + QUEUE_LIFE
  for i, w in ipairs(redis.call('ZRANGE', KEYS[5], '0', tostring(QUEUE_NEAR - 1))) do
    local lapses = tonumber(redis.call('ZSCORE', KEYS[6], w))
    local later = lapses and lapses > cutoff
    if later then redis.call('ZADD', KEYS[6], 'XX', string.format('%d', cutoff), w) end
    if later or (i == 1 and woken) then
      local grant = KEYS[5] .. ':' .. w
      redis.call('LPUSH', grant, '1')
      redis.call('PEXPIRE', grant, '2000')
      if i == 1 then
        channel = channel or (string.sub(KEYS[5], 1, -6) .. 'released')
        redis.call('PUBLISH', channel .. ':' .. w, 'released')
      end
    end
  end
end
-- wake(channel, head): the lock may be free: the live head of the queue and the front behind it
-- are put on notice. With nobody queued nobody is told: every waiter is queued. channel:
-- as notice's; head: the queue's first entry when the caller has just read it (nil: read here).
local function wake(channel, head)
  head = head or redis.call('ZRANGE', KEYS[5], '0', '0')[1]
  if head then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    head = live_head(now)
    if head then
      return notice(now, channel, true)
    end
  end
end
