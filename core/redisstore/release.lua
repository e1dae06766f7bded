-- reqlimit: give back one grant (core.Releaser), exactly as core.Policy.release does: its
-- entries leave the ring, the newer ones move one place older for each, and the ring ends
-- that many entries shorter (as a ring that is still growing, its bounds from the oldest
-- entry: 0 is always a safe start); its units leave its bucket of each bounded rate. Every
-- other grant stays. A grant no longer held changes nothing. Not on the decision's path, so
-- written for clarity: one GET, one SET of the whole value, keeping its expiry.
--
-- This file is a template: each include line is replaced by its fragment (fragments/).
--
-- KEYS[1]  the key's state, in the layout of the script that decides the policy: exact1.lua
--            (kind 1), exactn.lua (2), bounded1.lua (3), boundedn.lua (4), decide.lua (5),
--            compact1.lua (6).
-- KEYS[2]  the key's reset fence (reset.lua): a grant no later than it was forgotten.
-- ARGV[1]  packed little-endian i8: kind, the grant's time (microseconds, as the decision
--          replied; for kind 6 in the key's units, the reply divided by the unit), its
--          cost, L (the ring's length; 0 without one), the number of rates, the number of
--          bounded rates, each bounded rate's granule (microseconds), then the microseconds
--          the grant's time counts in (kind 6: the unit; else 1).
-- Returns  the units given back, then zeros (the decision scripts' reply shape).
--#include prelude
local floor, rep, sub = math.floor, string.rep, string.sub
local arg = ARGV[1]
local kind, now, cost, L, nr, nb = unpack('<i8i8i8i8i8i8', arg)
local key = KEYS[1]
local s = call('GET', key)
if not s then return $REPLY(0, 0, 0, 0, 0, 0, 0) end
-- A key reset since the grant forgot it, and its time, bucket or unit may be a later
-- grant's now. The fence is in microseconds; a grant of kind 6 in units, rounded up.
local fence = call('GET', KEYS[2])
if fence and #fence == 8 then
  local unit = unpack('<i8', arg, 49 + 8 * nb)
  if now <= floor((unpack('<i8', fence) + unit - 1) / unit) then return $REPLY(0, 0, 0, 0, 0, 0, 0) end
end

--#include layout
local O = 0 -- kind 6: the unit the ring's offsets count from
-- Anything malformed (a foreign value under our key) is left alone.
local n, w = 0, 0
if kind == 3 and #s ~= 39 + NB * 8 then return $REPLY(0, 0, 0, 0, 0, 0, 0) end
if kind == 4 and #s ~= 15 + 24 * nb + nb * NB * 8 then return $REPLY(0, 0, 0, 0, 0, 0, 0) end
if L > 0 then
  local len = #s
  if len < HDR or (len - HDR) % ES ~= 0 or len > HDR + ES * L then return $REPLY(0, 0, 0, 0, 0, 0, 0) end
  n = (len - HDR) / ES
  w = unpack('<I2', s)
  if kind == 6 then O = unpack('<i7', s, 12) end
  if not ((n < L and w == n) or (n == L and w < L)) then return $REPLY(0, 0, 0, 0, 0, 0, 0) end
end

local given = 0
-- Bounded rates: the grant's units leave the bucket of its time, if the window still
-- counts that bucket (a bucket that left it may hold a later bucket's counts now).
for j = 0, nb - 1 do
  local g = unpack('<i8', arg, 49 + 8 * j)
  local h, c = heads, counts
  if kind == 4 then
    h, c = heads + 24 * j, counts + j * NB * 8
  elseif kind == 5 then
    h, c = heads + j * BLK, counts + j * BLK
  end
  local lo, sum, newest = unpack('<i8i8i8', s, h)
  local k = floor(now / g)
  if k >= lo and k <= newest then
    local pos = c + (k % NB) * 8
    local n = unpack('<i8', s, pos)
    if n > cost then n = cost end
    if n > 0 then
      s = sub(s, 1, h + 7) .. pack('<i8', sum - n) .. sub(s, h + 16, pos - 1) .. pack('<i8', unpack('<i8', s, pos) - n) .. sub(s, pos + 8)
      given = n
    end
  end
end

-- The ring: find the grant's entries, the most recent ones at its time, and rewrite the
-- ring oldest first without them.
local function entry(x) -- the x-th most recent
  local at = HDR + 1 + ((w - x) % L) * ES
  if kind == 6 then return O + unpack('<I2', s, at) end
  return unpack('<i7', s, at)
end
if L > 0 then
  local k = 1
  while k <= n and entry(k) > now do k = k + 1 end
  local r = 0
  while r < cost and k + r <= n and entry(k + r) == now do r = r + 1 end
  if r > 0 then
    local ring = ''
    for x = n, 1, -1 do
      if x < k or x >= k + r then
        local at = HDR + 1 + ((w - x) % L) * ES
        ring = ring .. sub(s, at, at + ES - 1)
      end
    end
    local head = pack('<I2', n - r)
    if kind == 1 then
      head = head .. sub(s, 3, 9) .. pack('<I2', 0)
    elseif kind == 6 then
      head = head .. sub(s, 3, 9) .. pack('<I2', 0) .. sub(s, 12, 18)
    elseif kind == 2 then
      head = head .. sub(s, 3, 9) .. rep('\0\0', nr)
    else
      head = head .. sub(s, 3, HDR)
    end
    s = head .. ring
    given = r
  end
end
if given > 0 then call('SET', key, s, 'KEEPTTL') end
return $REPLY(given, 0, 0, 0, 0, 0, 0)
