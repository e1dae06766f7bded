-- Time never runs backwards for a key: clamp to the newest grant. The j-th most recent grant
-- as read (1 <= j <= n) is in slot (w - j) mod L.
if n > 0 then
  local newest = unpack('<i7', s, HDR + 1 + ((w - 1) % L) * 7)
  if now < newest then now = newest end
end
