-- reqlimit: forget a key (core.Resetter), and fence it. release.lua finds a grant by its
-- time, or its bucket's, which a grant made after the reset may share: the fence holds the
-- latest time a forgotten grant can carry, so that release.lua gives back none of them. It
-- lasts until every such grant has left its window. Not on the decision's path.
--
-- KEYS[1]  the key's state
-- KEYS[2]  its fence: packed little-endian i8 microseconds
-- ARGV[1]  packed little-endian i8: 1 to read the server's TIME (else 0), the time
--          otherwise (microseconds), the fence's expiry (milliseconds; 0 for none).
-- ARGV[2]  the key's layout, as release.lua's ARGV[1] (its grant and cost are not read).
-- Returns  1 if the key held grants (else 0), then zeros (the decision scripts' reply shape).
local unpack, pack, call = struct.unpack, struct.pack, redis.call
local useTime, now, px = unpack('<i8i8i8', ARGV[1])
local _, _, L, RING, fixed, LAST = unpack('<i8i8i8i8i8i8', ARGV[2])
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- A key that is gone holds no grant a release could be taken for: no fence.
local s = call('GET', KEYS[1])
if not s then return pack('<i8i8i8i8i8i8i8i8', 0, 0, 0, 0, 0, 0, 0, 0) end
call('DEL', KEYS[1])
-- A value not in the layout (a foreign one) holds no grant either: every decision reads it
-- as empty, and its bytes are no time to fence at. The checks are release.lua's.
local len, n, w = #s, (#s - RING) / 7, 0
if len >= 2 then w = unpack('<I2', s) end
if len < RING or n % 1 ~= 0 or n > L or (fixed == 1 and (n ~= L or (w >= L and w ~= 0)))
  or (fixed == 0 and not ((n < L and w == n) or (n == L and w < L))) then
  return pack('<i8i8i8i8i8i8i8i8', 0, 0, 0, 0, 0, 0, 0, 0)
end
-- A grant is recorded at the key's own clock, held forward to its latest decision (LAST)
-- or its newest grant (the ring's most recent entry, in slot w - 1), which is later than
-- TIME after the server's clock stepped back: the fence is the latest of the three, and
-- of the fence a former reset left, so that it never moves back.
local newest = 0
if LAST > 0 then
  if len >= LAST + 7 then newest = unpack('<i8', s, LAST) end
elseif n > 0 then
  newest = unpack('<i7', s, RING + 1 + ((w - 1) % n) * 7)
end
if newest > now then now = newest end
local old = call('GET', KEYS[2])
if old and #old == 8 and unpack('<i8', old) > now then now = unpack('<i8', old) end
if px > 0 then
  call('SET', KEYS[2], pack('<i8', now), 'PX', px)
else
  call('SET', KEYS[2], pack('<i8', now))
end
return pack('<i8i8i8i8i8i8i8i8', 1, 0, 0, 0, 0, 0, 0, 0)
