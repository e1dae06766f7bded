-- lo moves past empty buckets to the oldest that holds a grant, which leads (Reset is when
-- it leaves), as core's expire: after bounded_drop, in the pass that reports. Buckets
-- from lo to newest share no slot with a dropped one, so their slots read true.
if sum > 0 then
  while lo < newest and unpack('<i8', s, at + (lo % NB) * 8) == 0 do lo = lo + 1 end
end
