-- Report a bounded rate, as core.Policy.report: Reset when the oldest bucket that holds a
-- grant (lo) leaves (nothing more fits before), whole when the newest does; on a refusal,
-- RetryAfter when enough of the oldest buckets have left for cost more to fit (bucket k
-- leaves once now - T reaches its end).
local reset, retry, whole = 0, 0, 0
if sum > 0 then
  whole = (newest + 1) * g + T - now
  reset = (lo + 1) * g + T - now
end
local need = sum + cost - N
if not allowed and need > 0 then -- a rate with room reports no wait, as in core
  retry = (newest + 1) * g + T - now
  if retry < 0 then retry = 0 end
  local freed = 0
  for k = lo, newest do
    if k == rk then
      freed = freed + rc
    elseif not cleared and k <= newest0 then -- buckets after the old newest hold nothing
      freed = freed + unpack('<i8', s, at + (k % NB) * 8)
    end
    if freed >= need then
      retry = (k + 1) * g + T - now
      if retry < 0 then retry = 0 end
      break
    end
  end
  if retry > wait then wait = retry end
end
local rem = N - sum
if rem < 0 then rem = 0 end
