-- reqlimit: forget a key (core.Resetter), and fence it. release.lua finds a grant by its
-- time, or its bucket's or unit's, which a grant made after the reset may share: the fence
-- holds the latest time a forgotten grant can carry, so that release.lua gives back none of
-- them. It lasts until every such grant has left its window. Not on the decision's path:
-- one GET of the value more than a DEL alone, and one of the fence.
--
-- This file is a template: each include line is replaced by its fragment (fragments/).
--
-- KEYS[1]  the key's state
-- KEYS[2]  its fence: packed little-endian i8 microseconds
-- ARGV[1]  packed little-endian i8: 1 to read the server's TIME (else 0), the time
--          otherwise (microseconds), the fence's expiry (milliseconds; 0 for none).
-- ARGV[2]  the key's layout, as release.lua's ARGV[1] (its grant and cost are not read).
-- Returns  1 if the key held grants (else 0), then zeros, then the fence's time (the decision
--          scripts' reply shape).
--#include prelude
local useTime, now, px = unpack('<i8i8i8', ARGV[1])
local arg = ARGV[2]
local kind, _, _, _, nr, nb = unpack('<i8i8i8i8i8i8', arg)
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- A key that is gone holds no grant a release could be taken for: no fence.
local s = call('GET', KEYS[1])
if not s then return $REPLY(0, 0, 0, 0, 0, 0, 0) end
call('DEL', KEYS[1])
-- A grant is recorded at the key's own clock, held forward to its latest decision (LAST)
-- or its newest grant (the ring's most recent entry, in slot w - 1), which is later than
-- TIME after the server's clock stepped back: the fence is the latest of the three, and
-- of the fence a former reset left, so that it never moves back.
--#include layout
local len, newest = #s, 0
if LAST > 0 then
  if len >= LAST + 7 then newest = unpack('<i8', s, LAST) end
elseif len > HDR and (len - HDR) % ES == 0 then
  local n = (len - HDR) / ES
  local at = HDR + 1 + ((unpack('<I2', s) - 1) % n) * ES
  if kind == 6 then
    newest = (unpack('<i7', s, 12) + unpack('<I2', s, at)) * unpack('<i8', arg, 49 + 8 * nb)
  else
    newest = unpack('<i7', s, at)
  end
end
if newest > now then now = newest end
local old = call('GET', KEYS[2])
if old and #old == 8 and unpack('<i8', old) > now then now = unpack('<i8', old) end
if px > 0 then
  call('SET', KEYS[2], pack('<i8', now), 'PX', px)
else
  call('SET', KEYS[2], pack('<i8', now))
end
return $REPLY(1, 0, 0, 0, 0, 0, 0)
