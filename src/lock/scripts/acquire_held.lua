-- acquire (after acquire.lua's common take and holder.lua): the common refusal, and what
-- a lean call (a plain run's) does not serve; then acquire_rest.lua, after the preludes it
-- needs.
local now = tonumber(now_text)
-- The options of a rare run; a plain run's read as ''.
local ticket, arrival, waiting, shape = ARGV[6] or '', ARGV[7] or '', ARGV[8] or '', ARGV[9] or ''
local every_text, retry_failed, grant = ARGV[10] or '', ARGV[11] or '', ARGV[12] or ''
local max_waiters, replacer = ARGV[13] or '', ARGV[14] or ''
-- counted(event, body): a run turned away ('busy', 'skipped'), when it counts (ARGV[3]): the
-- lock's record counts it under the event's name and the audit log says who, body first.
local function counted(event, body)
  if ARGV[3] == '1' then
    redis.call('HINCRBY', KEYS[4], event, '1')
    redis.call('PEXPIRE', KEYS[4], RETAIN)
    audit(log_key, now_text, event, body .. ARGV[4])
  end
end
-- So does the common refusal (a cron run that overlaps, a herd): the lock held by another and
-- nothing else there, refused to a run that neither waits nor replaces, as the rest would
-- refuse it (no queue to count, no pause, no shared holder).
if found == 0 and current and not rare and current ~= ARGV[1] then
  local brief = holder_read(KEYS[3]) or false
  local pttl = redis.call('PTTL', KEYS[1])
  counted('busy', '')
  return {0, pttl, now, brief, 0, 0, '', 0, false, 0, 0}
end
if not KEYS[12] then return {-4} end
-- The rest reads and writes a held lock's records: not those of another layout. The holder's
-- brief is read (and its layout checked) before anything is written, for the refusal's reply.
local brief = nil
if current and current ~= ARGV[1] then brief = holder_read(KEYS[3]) or false end
