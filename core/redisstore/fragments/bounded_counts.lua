-- Write the counts a recorded request changed, as pieces of consecutive slots: all of them
-- when cleared (or new), else the slots from the first dropped bucket's through the
-- grant's, which sit side by side modulo NB (bucket newest - 100 shares the grant's slot
-- or sits just after it). Each piece starts at slot pstart.
if recorded then
  local slot = rk % NB
  if cleared then
    local piece, pstart = rep(ZERO, slot) .. pack('<i8', rc) .. rep(ZERO, NB - 1 - slot), 0
    $PUT_COUNTS
  elseif dhi < dlo then
    local piece, pstart = pack('<i8', rc), slot
    $PUT_COUNTS
  else
    -- The dropped buckets' run (D slots from a) and the grant's slot, which is in the run
    -- or near one end of it: one run of slots covers them, starting at a or at the grant's
    -- slot, whichever is shorter, wrapping at most once.
    local a, D = dlo % NB, dhi - dlo + 1
    local start, span = a, D
    local off = (slot - a) % NB
    if off >= D then
      if off + 1 <= NB - off + D then
        span = off + 1
      else
        start, span = slot, NB - off + D
      end
    end
    local piece, pstart = '', start
    for x = 0, span - 1 do
      local sl = (start + x) % NB
      local v = 0
      if sl == slot then
        v = rc
      elseif (sl - a) % NB >= D then
        v = unpack('<i8', s, at + sl * 8)
      end
      piece = piece .. pack('<i8', v)
      if sl == NB - 1 and x < span - 1 then -- wraps: put what reaches the end
        $PUT_COUNTS
        piece, pstart = '', 0
      end
    end
    $PUT_COUNTS
  end
end
