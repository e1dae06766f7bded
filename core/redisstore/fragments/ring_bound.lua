-- lo: how many of the oldest entries had left this rate's window when the key last
-- recorded a grant, kept in the header (the rate's b). Cutoffs have not moved back since
-- (now >= newest), so it bounds from below how many have left now.
local lo = 0
if n > 0 then
  lo = $B
  if lo > n then lo = 0 end -- 0 is always a safe start
end
