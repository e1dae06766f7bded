-- A recorded request takes cost entries at now from slot w, overwriting the oldest ov once
-- the ring is full. After recording, the ring holds nAfter entries: the m newest at now,
-- then the old ones by recency, of which the oldest ov are gone. The k-th oldest as read
-- (k = 0 .. n-1) is in slot (base + k) mod L, whether the ring is full (base = w) or still
-- growing (w = n, base = 0).
local m, ov = 0, 0
if recorded then
  m = cost
  ov = n + cost - L
  if ov < 0 then ov = 0 end
end
local base = (w - n) % L
local nAfter = n + m - ov
