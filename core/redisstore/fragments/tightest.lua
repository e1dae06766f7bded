-- The decision reports the tightest rate: on a refusal the one with the longest wait
-- (then the fewest left), on an admission the one with the fewest left (then the latest
-- reset), as core.Policy.report. Uses i (the rate's index, from 1), rem, retry, reset, whole.
local tighter
if dRate < 0 then
  tighter = true
elseif not allowed then
  tighter = retry > dRetry or (retry == dRetry and rem < dRem)
else
  tighter = rem < dRem or (rem == dRem and reset > dReset)
end
if tighter then
  dRate, dRem, dRetry, dReset = i - 1, rem, retry, reset
end
if whole > full then full = whole end
