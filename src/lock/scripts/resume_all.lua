-- resume_all: lifts the pause of every lock under a prefix (deletes the prefix-wide pause
-- record); `resume --all` then wakes the queued locks under the prefix (resume.lua on each).
-- KEYS[1] the prefix-wide pause record (hash)   KEYS[2] the prefix-wide audit log
-- ARGV[1] who resumes, as the audit log writes it
-- Reply: 1 when the record was deleted, 0 when there was none; or, before anything is written,
-- an error reply (see ahead.lua).
local refused = ahead(KEYS[2], {{'DEL', KEYS[1]}})
if refused then return refused end
local removed = redis.call('DEL', KEYS[1])
if removed == 1 then
  local t = redis.call('TIME')
  audit(KEYS[2], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), 'resumed', ARGV[1])
end
return removed
