-- reqlimit: the decision for a policy of SEVERAL exact rates ("10/1s,100/1m"), the same
-- answers as decide.lua and core.Policy.Apply in the straight-line style of exact1.lua:
-- one ring of the last L grants (L, the largest count) serves every rate, a rate's check is
-- one entry, its Remaining a gallop from where it stood at the last grant, and the expiry
-- is renewed about once per longest period (see docs/redis.md, "Speed").
--
-- KEYS[1]  the key's state: [I2 w] [i7 E] [I2 b] per rate, then a ring of up to L grant
--            times, i7 microseconds each; the next grant goes to slot w. E is the expiry
--            last set (server microseconds, 0: none). Rate i's b is how many of the oldest
--            entries had left its window when the key last recorded a grant.
-- ARGV[1]  packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= every count), mode (0 enforce, 1 penalty, 2 peek), ttl
--          (milliseconds: the longest period rounded up; 0 = no expiry), L, the number of
--          rates, then each rate's count and period (microseconds).
-- Returns  allowed (0/1), rate index, remaining, retry, reset, full reset, wait
--          (microseconds), as seven packed little-endian i8 in one string.
--
-- No tables and no closures: each one a call creates is an allocation and later work for
-- Lua's collector, and they cost the server more than the rest of the decision (a first
-- version with five tables and two closures took 50% more instructions).
local unpack, pack, call, rep, sub = struct.unpack, struct.pack, redis.call, string.rep, string.sub
local arg = ARGV[1]
local useTime, now, cost, mode, ttl, L, nr = unpack('<i8i8i8i8i8i8i8', arg)
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- The server's own time: expiry is counted from it, even after now is clamped forward.
local tnow = now
local key = KEYS[1]
local HDR = 9 + 2 * nr -- the entry in ring slot i starts at byte HDR + 7i

-- Read; anything malformed (a foreign value under our key) reads as empty.
local s = call('GET', key)
local w, n, E = 0, 0, 0
if s then
  local len = #s
  if len >= HDR and (len - HDR) % 7 == 0 and len <= HDR + 7 * L then
    local n0 = (len - HDR) / 7
    local w0, E0 = unpack('<I2i7', s)
    if (n0 < L and w0 == n0) or (n0 == L and w0 < L) then
      w, n, E = w0, n0, E0
    else
      s = ''
    end
  else
    s = ''
  end
else
  s = ''
end

-- The j-th most recent grant as read (j >= 1) is in slot (w - j) mod L, if j <= n.
-- Time never runs backwards for a key: clamp to the newest grant.
if n > 0 then
  local newest = unpack('<i7', s, HDR + 1 + ((w - 1) % L) * 7)
  if now < newest then now = newest end
end

-- Decide: rate i has room when its (count - cost + 1)-th most recent grant has left its
-- window (or the ring holds fewer grants than that).
local allowed = true
for i = 1, nr do
  local N, T = unpack('<i8i8', arg, 41 + 16 * i)
  local j = N - cost + 1
  if j <= n and unpack('<i7', s, HDR + 1 + ((w - j) % L) * 7) > now - T then
    allowed = false
    break
  end
end

-- Record cost entries at now from slot w, overwriting the oldest ov once the ring is full.
local m, ov = 0, 0
if mode == 1 or (allowed and mode == 0) then
  m = cost
  ov = n + cost - L
  if ov < 0 then ov = 0 end
end

-- Per rate, on the state after recording (the m newest grants at now, then the old ones
-- by recency, of which the oldest ov are gone): B, how many of the oldest entries are at
-- or before the rate's cutoff, found by a gallop up from the stored b (a lower bound:
-- counted at the newest grant, and cutoffs have not moved back since), then the report,
-- as core.Policy.report. The header's new b values are gathered on the way.
local base = (w - n) % L -- the oldest entry's slot
local nAfter = n + m - ov
local dRate, dRem, dRetry, dReset, full, wait = -1, 0, 0, 0, 0, 0
local bs = ''
for i = 1, nr do
  local N, T = unpack('<i8i8', arg, 41 + 16 * i)
  local cutoff = now - T
  local lo, hi, step = 0, n, 1
  if n > 0 then
    lo = unpack('<I2', s, 8 + 2 * i)
    if lo > n then lo = 0 end -- 0 is always a safe start
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
    local mid = (lo + hi) / 2
    mid = mid - mid % 1
    if unpack('<i7', s, HDR + 1 + ((base + mid) % L) * 7) <= cutoff then lo = mid + 1 else hi = mid end
  end
  local out = lo - ov
  if out < 0 then out = 0 end
  if m > 0 then bs = bs .. pack('<I2', out) end
  local used = nAfter - out
  if used > N then used = N end
  local reset, retry = 0, 0
  if used > 0 then
    if m > 0 then
      reset = T
    else
      reset = unpack('<i7', s, HDR + 1 + ((w - 1) % L) * 7) + T - now
    end
  end
  if not allowed then
    -- The (N - cost + 1)-th most recent grant after recording.
    local k = N - cost + 1
    if k <= m then
      retry = T
    elseif k - m <= n - ov then
      retry = unpack('<i7', s, HDR + 1 + ((w - (k - m)) % L) * 7) + T - now
      if retry < 0 then retry = 0 end
    end
    if retry > wait then wait = retry end
  end
  local rem = N - used
  local tighter
  if dRate < 0 then
    tighter = true
  elseif not allowed then
    tighter = retry > dRetry or (retry == dRetry and rem < dRem)
  else
    tighter = rem < dRem or (rem == dRem and reset > dReset)
  end
  if tighter then
    dRate, dRem, dRetry, dReset = i - 1, rem, retry, reset
  end
  if reset > full then full = reset end
end

-- Write. Expiry is cleanup only, renewed as in exact1.lua: the key must outlive its newest
-- grant by the longest period (ttl); it is set to twice that and renewed only when less
-- than ttl is left, from the server's own TIME plus 1 ms.
if m > 0 then
  local p = pack('<i7', now)
  local renew = ttl > 0 and E < now + ttl * 1000
  local ms = 0
  if renew then
    E = now + 2 * ttl * 1000
    ms = math.ceil((E - tnow) / 1000) + 1
  end
  local w0 = w
  local header = pack('<I2i7', (w + cost) % L, E) .. bs
  if n == L then
    call('SETRANGE', key, '0', header)
    if renew then call('PEXPIRE', key, ms) end
    local first = L - w0
    if cost <= first then
      call('SETRANGE', key, HDR + w0 * 7, rep(p, cost))
    else
      call('SETRANGE', key, HDR + w0 * 7, rep(p, first))
      call('SETRANGE', key, HDR, rep(p, cost - first))
    end
  else
    local first, ring = L - w0, nil
    if cost <= first then
      ring = sub(s, HDR + 1, HDR + w0 * 7) .. rep(p, cost)
    else -- the grant wraps round: the ring is full afterwards
      local second = cost - first
      ring = rep(p, second) .. sub(s, HDR + 1 + second * 7, HDR + w0 * 7) .. rep(p, first)
    end
    if renew then
      call('SET', key, header .. ring, 'PX', ms)
    elseif ttl > 0 then
      call('SET', key, header .. ring, 'KEEPTTL')
    else
      call('SET', key, header .. ring)
    end
  end
end

local a = 0
if allowed then a = 1 end
return pack('<i8i8i8i8i8i8i8', a, dRate, dRem, dRetry, dReset, full, wait)
