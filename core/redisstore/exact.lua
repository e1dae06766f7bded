-- reqlimit: one decision for a policy of exact rates ("3/1m", "10/1s,100/1m"), atomically,
-- with the same answers as core's engine (Policy.apply). One ring of the last L grant
-- times (L, the largest count) serves every rate: a request of cost c fits rate N per T if
-- the (N-c+1)-th most recent grant has left the window (now - T, now].
--
-- KEYS[1]  the key's state: [I2 w] [i7 E] [I2 b] per rate, then a ring of up to L grant
--          times, i7 microseconds each (the ring holds only real grants, so a key that saw
--          3 grants stores 3, until it fills; a give-back then leaves it full, its oldest
--          entries standing for the grants it forgot, see release.lua); the next grant goes
--          to slot w. E is the expiry last set, in server microseconds (0: none). Rate i's
--          b is how many of the oldest entries had left its window at the key's last grant:
--          its search starts there.
-- ARGV[1]  packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= every count), mode (0 enforce, 1 penalty, 2 peek), ttl (the
--          longest period in milliseconds, rounded up; 0: no expiry), L, the number of
--          rates, then each rate's count and period (microseconds).
-- Returns  eight packed i8: allowed (0/1), the reported rate's index, remaining, retry,
--          reset, full reset, the longest wait (microseconds), the grant's time.
--
-- Redis's Lua interprets every global lookup, table index and call, so library functions
-- are held in locals and the script makes no table and no closure.
local unpack, pack, call, rep, sub = struct.unpack, struct.pack, redis.call, string.rep, string.sub
local arg, key = ARGV[1], KEYS[1]
local useTime, now, cost, mode, ttl, L, nr = unpack('<i8i8i8i8i8i8i8', arg)
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local tnow = now -- the server's time, which the expiry counts from
local HDR = 9 + 2 * nr -- the entry in ring slot i starts at byte HDR + 7i + 1

-- Read. Anything malformed (a foreign value under our key) reads as an empty ring.
local s = call('GET', key)
local w, n, E = 0, 0, 0
if s then
  local len = #s
  if len >= HDR and (len - HDR) % 7 == 0 and len <= HDR + 7 * L then
    local n0 = (len - HDR) / 7
    local w0, e0 = unpack('<I2i7', s)
    if (n0 < L and w0 == n0) or (n0 == L and w0 < L) then w, n, E = w0, n0, e0 end
  end
end
if n == 0 then s = '' end

-- Time never runs backwards for a key: now is at least its newest grant, the entry
-- before slot w (the j-th most recent is in slot (w - j) mod L).
if n > 0 then
  local newest = unpack('<i7', s, HDR + 1 + ((w - 1) % L) * 7)
  if now < newest then now = newest end
end

-- Every rate must have room.
local allowed = true
for i = 1, nr do
  local N, T = unpack('<i8i8', arg, 41 + 16 * i)
  local k = N - cost + 1
  if k <= n and unpack('<i7', s, HDR + 1 + ((w - k) % L) * 7) > now - T then
    allowed = false
    break
  end
end
-- An admission is recorded, and so is a refusal in Penalty mode; a Peek records nothing.
local recorded = mode == 1 or (allowed and mode == 0)

-- A recorded request takes cost entries at now from slot w, overwriting the oldest ov once
-- the ring is full. After it the ring holds nAfter entries: the m newest at now, then the
-- old ones; the k-th oldest as read (k = 0 .. n-1) is in slot (base + k) mod L.
local m, ov = 0, 0
if recorded then
  m = cost
  ov = n + cost - L
  if ov < 0 then ov = 0 end
end
local base = (w - n) % L
local nAfter = n + m - ov

-- Per rate, the report on the state after recording, as core's report: how many it counts
-- (used), when the oldest of them leaves (reset), when the newest does (whole), and on a
-- refusal when the (N-cost+1)-th most recent does (retry). The reported rate is the one
-- with the fewest left; ties go on a refusal to the longest wait, on an admission to the
-- latest reset. The header's new b values are gathered on the way.
local dRate, dRem, dRetry, dReset, dShown, full = -1, 0, 0, 0, 0, 0
local bs = ''
for i = 1, nr do
  local N, T = unpack('<i8i8', arg, 41 + 16 * i)
  local cutoff = now - T
  -- out: how many of the oldest entries are at or before the cutoff. Cutoffs have not
  -- moved back since the last grant, so its b bounds that from below; a gallop up from
  -- there, then halving, reads two or three entries on a busy key.
  local lo, hi, step = 0, n, 1
  if n > 0 then
    lo = unpack('<I2', s, 8 + 2 * i)
    if lo > n then lo = 0 end
  end
  while true do
    local k = lo + step - 1
    if k >= hi then break end
    if unpack('<i7', s, HDR + 1 + ((base + k) % L) * 7) <= cutoff then
      lo, step = k + 1, step * 2
    else
      hi = k
      break
    end
  end
  while lo < hi do
    local k = (lo + hi) / 2
    k = k - k % 1 -- floor, without a call
    if unpack('<i7', s, HDR + 1 + ((base + k) % L) * 7) <= cutoff then lo = k + 1 else hi = k end
  end
  local out = lo - ov
  if out < 0 then out = 0 end
  local used = nAfter - out
  if used > N then used = N end -- a rate counts its last N grants at most
  local reset, retry, whole = 0, 0, 0
  if used > 0 then
    if m > 0 then
      whole = T -- the newest entry is now
    else
      whole = unpack('<i7', s, HDR + 1 + ((w - 1) % L) * 7) + T - now
    end
    if used <= m then
      reset = T
    else
      reset = unpack('<i7', s, HDR + 1 + ((w - (used - m)) % L) * 7) + T - now
    end
  end
  if not allowed then
    -- The (N-cost+1)-th most recent after recording: one of the m new ones, an old one
    -- (the (k-m)-th most recent as read), or none if the ring holds fewer.
    local k = N - cost + 1
    if k <= m then
      retry = T
    elseif k - m <= n - ov then
      retry = unpack('<i7', s, HDR + 1 + ((w - (k - m)) % L) * 7) + T - now
      if retry < 0 then retry = 0 end
    end
  end
  local rem = N - used
  if recorded then bs = bs .. pack('<I2', out) end
  local tighter = dRate < 0
  if not tighter and not allowed then
    tighter = rem < dRem or (rem == dRem and retry > dShown)
  elseif not tighter then
    tighter = rem < dRem or (rem == dRem and reset > dReset)
  end
  if tighter then dRate, dRem, dReset, dShown = i - 1, rem, reset, retry end
  if retry > dRetry then dRetry = retry end
  if whole > full then full = whole end
end

-- Write. Expiry is cleanup only: the key must outlive its newest grant by the longest
-- period. Renewing it on every grant would cost a PEXPIRE each time, the dearest part of a
-- write, so it is set to twice that and renewed only when less than one period is left.
-- E is on the key's clock; Redis counts the expiry from the server's TIME, so it is set to
-- reach E even when that clock has stepped back behind the key, plus 1 ms against rounding.
if recorded then
  local renew, ms = false, 0
  if ttl > 0 and E < now + ttl * 1000 then
    renew, E = true, now + 2 * ttl * 1000
    ms = math.ceil((E - tnow) / 1000) + 1
  end
  local head, p, first = pack('<I2i7', (w + cost) % L, E) .. bs, pack('<i7', now), L - w
  if n == L then
    -- A full ring: only the changed bytes. Building the long value in Lua for a SET would
    -- cost more than the extra calls (docs/bench/redis/instructions.sh hot100).
    call('SETRANGE', key, '0', head)
    if renew then call('PEXPIRE', key, ms) end
    if cost <= first then
      call('SETRANGE', key, HDR + w * 7, rep(p, cost))
    else
      call('SETRANGE', key, HDR + w * 7, rep(p, first))
      call('SETRANGE', key, HDR, rep(p, cost - first))
    end
  else
    -- A growing ring: the whole value with one SET, which sizes it exactly (a write past
    -- the end would make Redis over-allocate).
    local ring
    if cost <= first then
      ring = sub(s, HDR + 1, HDR + w * 7) .. rep(p, cost)
    else -- the grant wraps round: the ring is full afterwards
      local second = cost - first
      ring = rep(p, second) .. sub(s, HDR + 1 + second * 7, HDR + w * 7) .. rep(p, first)
    end
    if renew then
      call('SET', key, head .. ring, 'PX', ms)
    elseif ttl > 0 then
      call('SET', key, head .. ring, 'KEEPTTL')
    else
      call('SET', key, head .. ring)
    end
  end
end

local a = 0
if allowed then a = 1 end
return pack('<i8i8i8i8i8i8i8i8', a, dRate, dRem, dRetry, dReset, full, dRetry, now)
