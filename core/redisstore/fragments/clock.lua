-- The server's clock, which every process sharing the key reads alike, unless a test
-- clock's time is given.
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- The server's own time: expiry is counted from it, even after now is clamped forward.
local tnow = now
