-- Read the key's ring of up to L grant times, ES bytes each, after a header of HDR
-- bytes that starts [I2 w] and then the script's own fields; the next grant goes to slot
-- w, which is n while the ring grows. Anything malformed (a foreign value under our key)
-- reads as empty, and s as ''.
local s = call('GET', key)
local w, n = 0, 0
if s then
  local len = #s
  if len >= HDR and (len - HDR) % $ES == 0 and len <= HDR + $ES * L then
    local n0 = (len - HDR) / $ES
    local w0, x0, y0, z0 = unpack($HEAD, s)
    if (n0 < L and w0 == n0) or (n0 == L and w0 < L) then
      w, n, $HEAD_FIELDS = w0, n0, x0, y0, z0
    else
      s = ''
    end
  else
    s = ''
  end
else
  s = ''
end
