-- release_record (the end of release.lua, after the rest's block): records the run (when
-- ARGV[3] gives an outcome), or logs a hold ended without one, and replies.
if ARGV[3] ~= '' then
  local outcome = ARGV[3]
  if released == 0 then outcome = 'lease lost' end
  local ended = ARGV[4]
  if ended == '' then
    local t = redis.call('TIME')
    ended = string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
  end
  local last = outcome .. '\31' .. ARGV[5]
  -- When a run last ended ok is the last run's end while it ended ok: a run that ends
  -- otherwise after it moves that end to last_ok.
  if outcome ~= 'ok' then
    local before = redis.call('HMGET', KEYS[4], 'last')[1]
    local s, d = string.match(before or '', '^ok\31[^\31]*\31(%d+)\31(%d+)')
    if s then
      redis.call('HSET', KEYS[4], 'last_ok', string.format('%d', tonumber(s) + tonumber(d)))
    end
  end
  local created = redis.call('HSET', KEYS[4], 'last', last, 'host', ARGV[6], 'cmd', ARGV[7])
  if ARGV[9] then redis.call('HSET', KEYS[4], 'replaced_by', ARGV[9]) end
  redis.call('HINCRBY', KEYS[4], 'runs', '1')
  if outcome == 'lease lost' then redis.call('HINCRBY', KEYS[4], 'lost', '1') end
  if outcome == 'failed' or outcome == 'killed' or outcome == 'timed out' then
    redis.call('HINCRBY', KEYS[4], 'failed', '1')
  elseif outcome == 'replaced' then
    redis.call('HINCRBY', KEYS[4], 'replaced', '1')
  end
  -- The record's expiry is written by the take that began its window (acquire.lua), and here
  -- only when this write made the record (or a field of it) anew.
  if created > 0 then
    redis.call('HSET', KEYS[4], 'v', LAYOUT)
    redis.call('PEXPIRE', KEYS[4], RETAIN)
  end
  local event = 'released'
  if released == 0 then event = 'lost' end
  local n = redis.call('RPUSH', KEYS[3],
    ended .. '\31' .. event .. '\31outcome=' .. outcome .. '\31' .. ARGV[8])
  if n % 32 == 0 or n == 1 then audit(KEYS[3], ended, event, nil, nil, nil, n) end
  -- The --once-per window's run records how it ended.
  if KEYS[10] and redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
    redis.call('HSET', KEYS[10], 'outcome', outcome, 'ended', ended, 'exit',
      string.match(ARGV[5], '^[^\31]*'))
  end
else
  if released == 1 then
    local t = redis.call('TIME')
    local why = ARGV[4]
    if not why or why == '' then why = 'given back' end
    local body = 'outcome=' .. why .. '\31fence=' .. (given_fence or '')
    if ARGV[5] and ARGV[5] ~= '' then body = body .. '\31' .. ARGV[5] end
    audit(KEYS[3], string.format('%d', tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)),
      'released', body)
  end
  if KEYS[10] and redis.call('HMGET', KEYS[10], 'token')[1] == ARGV[1] then
    redis.call('DEL', KEYS[10])
  end
end
return released
