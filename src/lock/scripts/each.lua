-- (the end of every *_each script, behind `local function one(KEYS, ARGV)` and the script it
-- wraps) one call of the wrapped script per lock of a claim over several keys, in one round
-- trip: release, extend, leave, held, heal and raise_fence work per key, as they do for one
-- (and resume per lock that `resume --all` lifts or wakes).
-- KEYS: every call's keys in turn.
-- ARGV[1] the number of calls, then for each call: how many keys it takes, how many arguments,
--         and its arguments.
-- Reply: each call's reply, in order.
local replies, k, a = {}, 1, 2
for i = 1, tonumber(ARGV[1]) do
  local nk, na = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  replies[i] = one({unpack(KEYS, k, k + nk - 1)}, {unpack(ARGV, a + 2, a + 1 + na)})
  k, a = k + nk, a + 2 + na
end
return replies
