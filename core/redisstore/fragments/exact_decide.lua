-- An exact rate N per T has room for cost more when its (N - cost + 1)-th most recent
-- grant has left the window (now - T, now], or the ring holds fewer grants than that.
local k = N - cost + 1
if k <= n and $ENTRY((w - k) % L) > now - T then
  allowed = false
end
