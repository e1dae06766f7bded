-- Report an exact rate N per T, as core.Policy.report, on the ring after recording.
-- out: how many of the oldest entries are at or before the cutoff now - T, found among the
-- entries as read by a gallop up from lo (a lower bound: those older than lo are out),
-- then by halving. A busy key's window has moved by an entry or two since its last
-- grant, so this reads two or three entries where a search of the whole ring would read
-- seven or eight.
local cutoff = now - T
local hi, step = n, 1 -- entries older than lo are out; entries from hi on are in
while true do
  local k = lo + step - 1
  if k >= hi then break end
  if $ENTRY((base + k) % L) <= cutoff then
    lo, step = k + 1, step * 2
  else
    hi = k
    break
  end
end
while lo < hi do
  local k = (lo + hi) / 2
  k = k - k % 1 -- floor, without a call
  if $ENTRY((base + k) % L) <= cutoff then lo = k + 1 else hi = k end
end
local out = lo - ov
if out < 0 then out = 0 end
-- The rate counts its last N grants at most (the ring holds the largest count's).
local used = nAfter - out
if used > N then used = N end
-- reset: when the oldest grant the rate counts (the used-th most recent) leaves the window;
-- whole: when the newest does.
local reset, retry, whole = 0, 0, 0
if used > 0 then
  if m > 0 then
    whole = T -- the newest entry is now
  else
    whole = $ENTRY((w - 1) % L) + T - now
  end
  if used <= m then
    reset = T
  else
    reset = $ENTRY((w - (used - m)) % L) + T - now
  end
end
if not allowed then
  -- Admission waits for the (N - cost + 1)-th most recent grant after recording to leave
  -- the window: one of the m new ones, an old one (the (k - m)-th most recent as read), or
  -- none, if the ring holds fewer.
  local k = N - cost + 1
  if k <= m then
    retry = T
  elseif k - m <= n - ov then
    retry = $ENTRY((w - (k - m)) % L) + T - now
    if retry < 0 then retry = 0 end
  end
  if retry > wait then wait = retry end
end
local rem = N - used
