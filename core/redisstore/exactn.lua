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
local unpack, pack, call, rep, sub = struct.unpack, struct.pack, redis.call, string.rep, string.sub
local arg = ARGV[1]
local useTime, now, cost, mode, ttl, L, nr = unpack('<i8i8i8i8i8i8i8', arg)
local count, period = {}, {}
for i = 1, nr do
  count[i], period[i] = unpack('<i8i8', arg, 57 + (i - 1) * 16)
end
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- The server's own time: expiry is counted from it, even after now is clamped forward.
local tnow = now
local key = KEYS[1]
local HDR = 9 + 2 * nr -- the entry in ring slot i starts at byte HDR + 7i
local NEVER = -9007199254740992

-- Read; anything malformed (a foreign value under our key) reads as empty.
local s = call('GET', key)
local w, n, E = 0, 0, 0
local b = {}
for i = 1, nr do b[i] = 0 end
if s then
  local len = #s
  if len >= HDR and (len - HDR) % 7 == 0 and len <= HDR + 7 * L then
    local n0 = (len - HDR) / 7
    local w0, E0 = unpack('<I2i7', s)
    if (n0 < L and w0 == n0) or (n0 == L and w0 < L) then
      w, n, E = w0, n0, E0
      for i = 1, nr do
        local bi = unpack('<I2', s, 8 + 2 * i)
        if bi > n then bi = 0 end -- 0 is always a safe start for the search below
        b[i] = bi
      end
    else
      s = ''
    end
  else
    s = ''
  end
else
  s = ''
end

-- recent(j): the j-th most recent grant as read (j >= 1), NEVER where the ring holds fewer.
local function recent(j)
  if j > n then return NEVER end
  return (unpack('<i7', s, HDR + 1 + ((w - j) % L) * 7))
end

-- Time never runs backwards for a key: clamp to the newest grant.
local newest = recent(1)
if now < newest then now = newest end

-- Decide: rate i has room when its (count - cost + 1)-th most recent grant has left its
-- window.
local allowed = true
for i = 1, nr do
  if recent(count[i] - cost + 1) > now - period[i] then allowed = false end
end

-- B[i]: how many of the oldest entries are at or before rate i's cutoff. b[i] is a lower
-- bound (counted at the newest grant; cutoffs have not moved back since): gallop up from
-- it, then halve, as exact1.lua does.
local base = (w - n) % L -- the oldest entry's slot
local B = {}
for i = 1, nr do
  local cutoff = now - period[i]
  local lo, hi, step = b[i], n, 1
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
  B[i] = lo
end

-- Record: cost entries at now from slot w, overwriting the oldest ov once the ring is full.
local m, ov = 0, 0
if mode == 1 or (allowed and mode == 0) then
  m = cost
  ov = n + cost - L
  if ov < 0 then ov = 0 end
  local hb = {}
  for i = 1, nr do
    local x = B[i] - ov
    if x < 0 then x = 0 end
    hb[i] = pack('<I2', x)
  end
  local p = pack('<i7', now)
  local renew = ttl > 0 and E < now + ttl * 1000
  local ms = 0
  if renew then
    E = now + 2 * ttl * 1000
    ms = math.ceil((E - tnow) / 1000) + 1
  end
  local w0 = w
  local w1 = (w + cost) % L
  local header = pack('<I2i7', w1, E) .. table.concat(hb)
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

-- Report, as core.Policy.report, on the state after recording: the m newest grants at now,
-- then the old ones by recency, of which the oldest ov are gone.
local function after(k) -- the k-th most recent grant after recording
  if k <= m then return now end
  local j = k - m
  if j > n - ov then return NEVER end
  return recent(j)
end
local nAfter = n + m - ov
local dRate, dRem, dRetry, dReset, full, wait = -1, 0, 0, 0, 0, 0
for i = 1, nr do
  local T = period[i]
  local out = B[i] - ov
  if out < 0 then out = 0 end
  local used = nAfter - out
  if used > count[i] then used = count[i] end
  local reset, retry = 0, 0
  if used > 0 then reset = after(1) + T - now end
  if not allowed then
    retry = after(count[i] - cost + 1) + T - now
    if retry < 0 then retry = 0 end
    if retry > wait then wait = retry end
  end
  local rem = count[i] - used
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
local a = 0
if allowed then a = 1 end
return pack('<i8i8i8i8i8i8i8', a, dRate, dRem, dRetry, dReset, full, wait)
