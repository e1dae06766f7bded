-- The decision reports the rate with the fewest left (the response's r must never name
-- room another rate lacks): ties go, on a refusal, to the longest wait, on an admission
-- to the latest reset, as core.Policy.report. A refusal's wait (dRetry) is the longest of
-- all rates', whichever is reported. Uses i (the rate's index, from 1), rem, retry, reset,
-- whole.
local tighter
if dRate < 0 then
  tighter = true
elseif not allowed then
  tighter = rem < dRem or (rem == dRem and retry > dShown)
else
  tighter = rem < dRem or (rem == dRem and reset > dReset)
end
if tighter then
  dRate, dRem, dReset, dShown = i - 1, rem, reset, retry
end
if retry > dRetry then dRetry = retry end
if whole > full then full = whole end
