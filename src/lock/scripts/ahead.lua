-- ahead (put in front of pause, resume and resume_all): a script runs without a transaction,
-- and a command the server refuses half way (an ACL without it, an audit log of another type)
-- leaves what the commands before it wrote: a pause in force that `pause` said it could not
-- make, or a resume said to have failed that lifted the pause. These scripts are rare and
-- small, so they ask first: whether the caller may run each command they call on its key
-- (redis.acl_check_cmd, which Redis 7.0 and Valkey have; an older server is not asked) and
-- whether the audit log is a list, and refuse before writing anything.
-- ahead(log, calls): log: the audit log the script appends to (audit.lua's commands are
-- checked on it); calls: the script's other commands, {COMMAND, key, arg...} each (TIME is
-- always checked). Returns the error reply to return, or nil.
local function ahead(log, calls)
  local all = {{'RPUSH', log, 'x'}, {'PEXPIRE', log, '1'},
    {'LTRIM', log, '0', '-1'}, {'LINDEX', log, '0'}, {'LPOP', log}, {'TIME'}}
  for _, c in ipairs(calls) do all[#all + 1] = c end
  if redis.acl_check_cmd then
    for _, c in ipairs(all) do
      if not redis.acl_check_cmd(unpack(c)) then
        local on = ''
        if c[2] then on = ' on ' .. c[2] end
        return redis.error_reply(string.format(
          "ERR ACL failure in script: this user has no permissions to run the '%s' command%s"
          .. ' (asked before writing: nothing was changed)', string.lower(c[1]), on))
      end
    end
  end
  -- A read audit.lua makes anyway, of the entry it may trim: an error on any other type.
  local read = redis.pcall('LINDEX', log, '0')
  if type(read) == 'table' and read.err then
    if string.find(read.err, 'WRONGTYPE', 1, true) then
      return redis.error_reply(string.format(
        'WRONGTYPE %s holds another type of value than an audit log (a list); nothing was changed',
        log))
    end
    return read
  end
end
