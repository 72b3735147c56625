-- release: compare-and-delete (or, with --hold-at-least, compare-and-pexpire), plus the record
-- of the run and the counters.
-- KEYS[1] lock   KEYS[2] holder record   KEYS[3] last-run record (hash)   KEYS[4] counters
-- ARGV[1] token   ARGV[2] release channel   ARGV[3] keep (ms; 0 deletes)
-- ARGV[4] outcome ('' records nothing)   ARGV[5] exit status   ARGV[6] host   ARGV[7] pid
-- ARGV[8] user   ARGV[9] command   ARGV[10] started (ms)   ARGV[11] duration (ms)
-- ARGV[12] fence   ARGV[13] record ttl (ms)
-- Reply: 1 released (or kept), 0 the lock was no longer ours.
local released = 0
if redis.pcall('GET', KEYS[1]) == ARGV[1] then
  local keep = tonumber(ARGV[3])
  if keep > 0 then
    redis.call('PEXPIRE', KEYS[1], keep)
    if redis.call('PEXPIRE', KEYS[2], keep) == 1 then
      redis.call('HSET', KEYS[2], 'finished', 1)
    end
  else
    redis.call('DEL', KEYS[1], KEYS[2])
    redis.call('PUBLISH', ARGV[2], 'released')
  end
  released = 1
end
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[3], 'outcome', ARGV[4], 'exit', ARGV[5], 'host', ARGV[6],
    'pid', ARGV[7], 'user', ARGV[8], 'cmd', ARGV[9], 'started', ARGV[10],
    'ended', ARGV[10] + ARGV[11], 'duration_ms', ARGV[11], 'fence', ARGV[12])
  redis.call('PEXPIRE', KEYS[3], ARGV[13])
  redis.call('HINCRBY', KEYS[4], 'runs', 1)
  if ARGV[4] == 'lease lost' then redis.call('HINCRBY', KEYS[4], 'lost', 1) end
  if ARGV[4] == 'failed' or ARGV[4] == 'killed' then
    redis.call('HINCRBY', KEYS[4], 'failed', 1)
  end
  redis.call('PEXPIRE', KEYS[4], ARGV[13])
end
return released
