-- Time never runs backwards for a key: clamp to the newest grant. The j-th most recent grant
-- as read (1 <= j <= n) is in slot (w - j) mod L.
if n > 0 then
  local newest = $ENTRY((w - 1) % L)
  if now < newest then now = newest end
end
