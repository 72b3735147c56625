-- pause: stores a pause record; while it is in force, acquire.lua refuses every new taker of
-- the lock (KEYS[1] a lock's pause record) or of every lock under a prefix (the prefix-wide one).
-- KEYS[1] the pause record (hash)   KEYS[2] the audit log it is logged in (see audit.lua)
-- ARGV[1] how long the pause lasts (ms; 0: until resumed)   ARGV[2] how long the record is
--         kept after it lapsed (ms), so that `check` can tell a pause that ran out unresumed
-- ARGV[3] who pauses and why, as the audit log writes it (name=value pairs)
-- ARGV[4..] who pauses and why, as field/value pairs (record.rs writes them); the script adds
--          since and until (server time, ms; until 0: until resumed).
-- Reply: {since, until}; or, before anything is written, an error reply (see ahead.lua).
local refused = ahead(KEYS[2], {{'DEL', KEYS[1]}, {'HSET', KEYS[1], 'since', '0'},
  {'PEXPIRE', KEYS[1], '1'}})
if refused then return refused end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local span = tonumber(ARGV[1])
local untl = 0
if span > 0 then untl = now + span end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'since', string.format('%d', now), 'until', string.format('%d', untl),
  unpack(ARGV, 4))
if span > 0 then redis.call('PEXPIRE', KEYS[1], string.format('%d', span + tonumber(ARGV[2]))) end
audit(KEYS[2], now, 'paused', string.format('until=%d\31%s', untl, ARGV[3]))
return {now, untl}
