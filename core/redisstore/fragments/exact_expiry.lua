-- Expiry is cleanup only: the key must outlive its newest grant by the longest period, ttl
-- (milliseconds; 0: no expiry). Renewing it on every grant would cost a PEXPIRE (or SET's
-- PX) each time, the dearest part of a write, so it is set to twice that and renewed only
-- when less than ttl is left: a key then expires between one and two longest periods after
-- its newest grant, never sooner. E is on the key's clock (clamped to its newest grant);
-- the expiry Redis counts starts from the server's TIME, so it is set to reach E even when
-- the server's clock has stepped back behind the key, plus 1 ms against rounding and the
-- few microseconds between the script's start and TIME.
local renew, ms = false, 0
if recorded and ttl > 0 and E < $KEYNOW + ttl * 1000 then
  renew = true
  E = $KEYNOW + 2 * ttl * 1000
  ms = math.ceil((E - tnow) / 1000) + 1
end
