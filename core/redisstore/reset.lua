-- reqlimit: forget a key (core.Resetter), and fence it. release.lua finds a grant by its
-- time, or its bucket's or unit's, which a grant made after the reset may share: the fence
-- holds the reset's time, the latest a forgotten grant can carry, so that release.lua gives
-- back none of them. It lasts until every such grant has left its window.
--
-- KEYS[1]  the key's state
-- KEYS[2]  its fence: the reset's time, packed little-endian i8 microseconds
-- ARGV[1]  packed little-endian i8: 1 to read the server's TIME (else 0), the time
--          otherwise (microseconds), the fence's expiry (milliseconds; 0 for none).
local useTime, now, px = struct.unpack('<i8i8i8', ARGV[1])
if useTime == 1 then
  local t = redis.call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- A key that is gone holds no grant a release could be taken for: no fence.
if redis.call('DEL', KEYS[1]) == 0 then return 0 end
if px > 0 then
  redis.call('SET', KEYS[2], struct.pack('<i8', now), 'PX', px)
else
  redis.call('SET', KEYS[2], struct.pack('<i8', now))
end
return 1
