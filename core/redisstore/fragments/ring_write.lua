-- Write a recorded request's cost entries at now from slot w, after the header.
-- While the ring grows, the whole value with one SET (it is short then, and a SET sizes
-- the value exactly, where a write past the end would make Redis over-allocate); once it
-- is full, the changed bytes with SETRANGE: building a long string in Lua and handing it to
-- SET costs more than the extra call. renew and ms say whether and how to set the expiry.
if recorded then
  local p = $PACK_ENTRY(now)
  local w0 = w
  if n == L then
    call('SETRANGE', key, '0', $RING_HEADER)
    if renew then call('PEXPIRE', key, ms) end
    local first = L - w0
    if cost <= first then
      call('SETRANGE', key, HDR + w0 * $ES, rep(p, cost))
    else
      call('SETRANGE', key, HDR + w0 * $ES, rep(p, first))
      call('SETRANGE', key, HDR, rep(p, cost - first))
    end
  else
    local first, ring = L - w0, nil
    if n == 0 then
      ring = rep(p, cost)
    elseif cost <= first then
      ring = sub(s, HDR + 1, HDR + w0 * $ES) .. rep(p, cost)
    else -- the grant wraps round: the ring is full afterwards
      local second = cost - first
      ring = rep(p, second) .. sub(s, HDR + 1 + second * $ES, HDR + w0 * $ES) .. rep(p, first)
    end
    local v = $RING_HEADER .. ring
    if renew then
      call('SET', key, v, 'PX', ms)
    elseif $KEEPTTL then
      call('SET', key, v, 'KEEPTTL')
    else
      call('SET', key, v)
    end
  end
end
