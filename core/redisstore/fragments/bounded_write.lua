-- Write the header (the whole value for a new key, its counts gathered in cs) after a
-- recorded request; otherwise only the latest decision's time, when it moved, so that time
-- never runs backwards for the key.
-- Expiry is cleanup only: the key must outlive keep. It is set a longest period beyond
-- that and renewed only when a grant finds it short, so an expiry write is needed about
-- once per period rather than on every grant. E is on the key's clock (clamped to last);
-- Redis counts the expiry from the server's TIME, so it is set to reach E even when that
-- clock has stepped back behind the key, plus 1 ms against rounding and the microseconds
-- between the script's start and TIME.
if recorded then
  local renew, ms = false, 0
  if expire == 1 and E < keep then
    renew, E = true, keep + longest
    ms = math.ceil((E - tnow) / 1000) + 1
  end
  if fresh then
    if renew then
      call('SET', key, $HEADER .. cs, 'PX', ms)
    else
      call('SET', key, $HEADER .. cs)
    end
  else
    call('SETRANGE', key, '0', $HEADER)
    if renew then call('PEXPIRE', key, ms) end
  end
elseif not fresh and now > last then
  call('SETRANGE', key, '0', pack('<i8', now))
end
