-- resume: lifts a lock's pause (deletes its pause record) and, when the lock is free, wakes the
-- head of its queue at once instead of at its next attempt (5 s apart while paused).
-- KEYS[1..10] as in release.lua (KEYS[3] the audit log)   KEYS[11] the pause record (hash)
-- ARGV[1] release channel   ARGV[2] who resumes it, as the audit log writes it
-- ARGV[3] '1': wake even when there was no pause record (the prefix-wide pause, which held the
--         lock too, was lifted)
-- Reply: 1 when a pause record was deleted, 0 when there was none; or, before anything is
-- written, an error reply (see ahead.lua).
local refused = ahead(KEYS[3], {{'DEL', KEYS[11]}})
if refused then return refused end
local removed = redis.call('DEL', KEYS[11])
if removed == 1 then
  local t = redis.call('TIME')
  audit(KEYS[3], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 'resumed', ARGV[2])
end
-- The wake is the resume's courtesy, not the resume: waiters behind a pause try again on their
-- own within 5 s, so a wake the server refuses (an ACL without lpush, a queue of another type)
-- leaves the resume done and said.
if (removed == 1 or ARGV[3] == '1') and not redis.pcall('GET', KEYS[1]) then
  pcall(wake, ARGV[1])
end
return removed
