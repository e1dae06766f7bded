-- A recorded request counts cost in the bucket of now, or the newest if that is later
-- (time does not run backwards for a rate). A bucket holds at most N (as core's record): a
-- full one refuses alone, and the cap keeps Penalty's sums bounded and exact. rk is the
-- bucket recorded in (-1: none) and rc its count after; newest0 the newest before.
local rk, rc, newest0 = -1, 0, newest
if recorded then
  rk = floor(now / g)
  if rk < newest then rk = newest end
  if sum == 0 then lo = rk end -- the only bucket that holds a grant (see bounded_drop)
  local slot = rk % NB
  local d = dlo + (slot - dlo % NB) % NB -- the dropped bucket in this slot, if any
  if not cleared and not (dhi >= dlo and d <= dhi) then rc = unpack('<i8', s, at + slot * 8) end
  local add = N - rc
  if add > cost then add = cost end
  if add > 0 then
    rc = rc + add
    sum = sum + add
  end
  newest = rk
end
