-- reqlimit: give back one grant (core.Releaser) exactly as core's engine does
-- (Policy.release): its entries leave the ring, the newer ones move one place older for
-- each, and the oldest places left hold nothing if the ring never filled; else they stand
-- for the grants it forgot, for a decision whose clock reads earlier than the given-back
-- grant (a server clock stepped back): a time no earlier than any of them (the oldest held)
-- and out of every window from the newest grant on. Its units leave its bucket of each
-- bounded rate. Every other grant stays. A grant no longer held changes nothing. Not on
-- the decision's path, so written for clarity: one GET, one SET of the whole value.
--
-- KEYS[1]  the key's state, in the layout of exact.lua or bounded.lua.
-- KEYS[2]  the key's reset fence (reset.lua): a grant no later than it was forgotten.
-- ARGV[1]  packed little-endian i8, the layout as store.go names it: the grant's time
--          (microseconds, as the decision replied), its cost, L, the ring's first byte,
--          whether the ring has all L slots (1: bounded.lua's, empty ones NEVER) or only
--          its grants (0: exact.lua's), the byte of the latest decision's time (reset.lua
--          reads it; 0: none), NB, a bounded rate's count slots (bounds.Buckets+1), nb,
--          the number of bounded rates, then each one's block's first byte and granule
--          (microseconds), then the longest exact rate's period (microseconds; 0: none).
-- Returns  the units given back, then zeros (the decision scripts' reply shape).
local unpack, pack, call, sub, floor = struct.unpack, struct.pack, redis.call, string.sub, math.floor
local arg = ARGV[1]
local at, cost, L, RING, fixed, _, NB, nb = unpack('<i8i8i8i8i8i8i8i8', arg)
local none = pack('<i8i8i8i8i8i8i8i8', 0, 0, 0, 0, 0, 0, 0, 0)
local s = call('GET', KEYS[1])
if not s then return none end
-- A key reset since the grant forgot it, and its time or bucket may be a later grant's.
local fence = call('GET', KEYS[2])
if fence and #fence == 8 and at <= unpack('<i8', fence) then return none end

-- Anything malformed (a foreign value under our key) is left alone.
local len, w = #s, 0
local n = (len - RING) / 7 -- the ring's grants (or slots)
if L > 0 and len >= 2 then w = unpack('<I2', s) end
if len < RING or n % 1 ~= 0 or n > L or (fixed == 1 and (n ~= L or (w >= L and w ~= 0)))
  or (fixed == 0 and not ((n < L and w == n) or (n == L and w < L))) then return none end

local given = 0
-- Bounded rates: the grant's units leave the bucket of its time, if the window still
-- counts that bucket (a bucket that left it may hold a later bucket's counts now).
for j = 0, nb - 1 do
  local B, g = unpack('<i8i8', arg, 65 + 16 * j)
  local lo, sum, newest = unpack('<i8i8i8', s, B + 1)
  local k = floor(at / g)
  if k >= lo and k <= newest then
    local pos = B + 25 + (k % NB) * 8
    local c = unpack('<i8', s, pos)
    if c > cost then c = cost end
    if c > 0 then
      s = sub(s, 1, B + 8) .. pack('<i8', sum - c) .. sub(s, B + 17, pos - 1) .. pack('<i8', unpack('<i8', s, pos) - c) .. sub(s, pos + 8)
      given = c
    end
  end
end

-- The ring: find the grant's entries, the most recent ones at its time (the x-th most
-- recent is in slot (w - x) mod L), and rewrite the ring oldest first without them.
if n > 0 then
  local k = 1
  while k <= n and unpack('<i7', s, RING + 1 + ((w - k) % L) * 7) > at do k = k + 1 end
  local r = 0
  while r < cost and k + r <= n and unpack('<i7', s, RING + 1 + ((w - k - r) % L) * 7) == at do r = r + 1 end
  if r > 0 then
    local ring, head, w2 = '', sub(s, 3, RING), 0
    -- What the oldest places hold: NEVER if the ring never filled (exact.lua's then holds
    -- fewer than L grants, bounded.lua's an empty oldest slot), and exact.lua's shrinks.
    local never = -36028797018963968
    local forgot, oldest = never, never
    if n == L then oldest = unpack('<i7', s, RING + 1 + (w % L) * 7) end
    if oldest ~= never then
      forgot = unpack('<i7', s, RING + 1 + ((w - 1) % L) * 7) - unpack('<i8', arg, 65 + 16 * nb)
      if oldest < forgot then forgot = oldest end
    end
    if fixed == 1 or forgot ~= never then
      ring = string.rep(pack('<i7', forgot), r) -- the oldest slots
    else
      w2 = n - r
    end
    if fixed == 0 then
      head = sub(s, 3, 9) .. string.rep('\0', RING - 9) -- each rate's b: 0 is a safe start
    end
    for x = n, 1, -1 do
      if x < k or x >= k + r then
        local e = RING + 1 + ((w - x) % L) * 7
        ring = ring .. sub(s, e, e + 6)
      end
    end
    s = pack('<I2', w2) .. head .. ring
    given = r
  end
end
if given > 0 then call('SET', KEYS[1], s, 'KEEPTTL') end
return pack('<i8i8i8i8i8i8i8i8', given, 0, 0, 0, 0, 0, 0, 0)
