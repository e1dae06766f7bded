-- A bounded rate N per T counts its grants in NB buckets of g microseconds (T/100 rounded
-- up): bucket k is counted in slot k mod NB while lo <= k <= newest, its count at byte
-- at + 8 * slot of s, and its slot is zero once it is dropped. sum is their total.
-- Drop the buckets that no longer overlap (now - T, now]. A bucket counts whole while any
-- part of it does, so the count never falls short of the grants in the window: that keeps
-- the bounded form strict. After this, cleared says every count is zero (or the key is
-- new); otherwise buckets dlo..dhi were dropped here, and their slots read as zero.
local cleared, dlo, dhi = fresh, 0, -1
local lo2 = floor((now - T) / g)
if lo2 > lo then
  if sum ~= 0 then
    if lo2 - lo >= NB then
      cleared, sum = true, 0
    else
      dlo, dhi = lo, lo2 - 1
      for k = lo, lo2 - 1 do sum = sum - unpack('<i8', s, at + (k % NB) * 8) end
    end
  end
  lo = lo2
end
