-- reqlimit: one decision for a policy with a bounded rate (Count above core's exact
-- maximum: "1000000/1s", "5/1s,1000/1m"), atomically, with the same answers as core's
-- engine (Policy.apply). A bounded rate N per T counts its grants in NB buckets of g
-- microseconds (T/100 rounded up): bucket k is counted in slot k mod NB while
-- lo <= k <= newest, and its slot is zero once it is dropped. A bucket counts whole while
-- any part of it overlaps the window (now - T, now], so the count never falls short of the
-- grants in it: that keeps the bounded form strict. The policy's exact rates, if any, share
-- one ring of the last L grant times, as in exact.lua.
--
-- KEYS[1]  the key's state: [I2 w] [i8 last] [i7 E], then per bounded rate [i8 lo]
--          [i8 sum] [i8 newest] [i8 counts x NB], then a ring of L grant times, i7
--          microseconds each (NEVER: empty); the next grant goes to slot w. last is the
--          latest decision's time, so time never runs backwards for the key; E is the
--          expiry last set (server microseconds, 0: none).
-- ARGV[1]  packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= every count), mode (0 enforce, 1 penalty, 2 peek), expire
--          (1: keep an expiry), L, the number of rates, of bounded rates, NB, the ring's
--          first byte, then each rate's count, period and granule (microseconds; 0 for an
--          exact rate).
-- Returns  eight packed i8: allowed (0/1), the reported rate's index, remaining, retry,
--          reset, full reset, the longest wait (microseconds), the grant's time.
--
-- As exact.lua does, and for the same reason, it holds library functions in locals.
local unpack, pack, call, rep, floor = struct.unpack, struct.pack, redis.call, string.rep, math.floor
local arg, key = ARGV[1], KEYS[1]
local useTime, now, cost, mode, expire, L, nr, nb, NB, RING = unpack('<i8i8i8i8i8i8i8i8i8i8', arg)
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local tnow = now -- the server's time, which the expiry counts from
local NEVER, ZERO, BLK = -36028797018963968, '\0\0\0\0\0\0\0\0', (3 + NB) * 8

-- Read. A new key, or anything malformed (a foreign value under our key), is fresh: it
-- holds no grant, and nothing is read from it.
local s = call('GET', key)
local fresh = not s or #s ~= RING + 7 * L
local w, last, E = 0, 0, 0
if not fresh then
  w, last, E = unpack('<I2i8i7', s)
  fresh = w >= L and w ~= 0
end
if fresh then w, last, E = 0, 0, 0 end
if now < last then now = last end

-- The k-th most recent grant of the ring after this decision records m entries at now.
local m, entry = 0, nil
if L > 0 then
  entry = function(k)
    if k <= m then return now end
    if fresh then return NEVER end
    return unpack('<i7', s, RING + 1 + ((w - k + m) % L) * 7)
  end
end

-- Pass 1, for several rates: every rate must have room. An exact rate has room for cost
-- more when its (N-cost+1)-th most recent grant has left the window; a bounded one while
-- its count, after dropping the buckets that left the window, stays within N. One rate
-- is decided in pass 2, which drops the same buckets: a second pass would read them twice.
local allowed = true
local j = 0
for i = 1, nr do
  if nr == 1 or fresh then break end -- a fresh key has room for every cost that fits
  local N, T, g = unpack('<i8i8i8', arg, 57 + 24 * i)
  if g == 0 then
    if entry(N - cost + 1) > now - T then allowed = false end
  else
    local lo, sum = unpack('<i8i8', s, 18 + j * BLK)
    j = j + 1
    local lo2 = floor((now - T) / g)
    if lo2 > lo and sum ~= 0 then
      if lo2 - lo >= NB then
        sum = 0
      else
        for k = lo, lo2 - 1 do sum = sum - unpack('<i8', s, 18 + (j - 1) * BLK + 24 + (k % NB) * 8) end
      end
    end
    if sum + cost > N then allowed = false end
  end
end
-- An admission is recorded, and so is a refusal in Penalty mode; a Peek records nothing.
local recorded = mode == 1 or (allowed and mode == 0)
if recorded then m = cost end

-- Pass 2: per rate, the same drop, then record and report as core's report, and write a
-- bounded rate's counts that changed. The reported rate is the one with the fewest left;
-- ties go on a refusal to the longest wait, on an admission to the latest reset.
local dRate, dRem, dRetry, dReset, dShown, full = -1, 0, 0, 0, 0, 0
local keep, longest, head0, blocks = 0, 0, '', ''
j = 0
for i = 1, nr do
  local N, T, g = unpack('<i8i8i8', arg, 57 + 24 * i)
  if T > longest then longest = T end
  local used, reset, retry, whole = 0, 0, 0, 0
  if g == 0 then
    -- used: the grants after the cutoff among the last N, by a gallop from the newest and
    -- then halving.
    local cutoff = now - T
    if entry(N) > cutoff then
      used = N
    else
      local lo, hi = 0, 1 -- entry lo is after the cutoff (0: none checked), entry hi is not
      while hi < N and entry(hi) > cutoff do lo, hi = hi, 2 * hi end
      if hi > N then hi = N end
      while lo + 1 < hi do
        local mid = floor((lo + hi) / 2)
        if entry(mid) > cutoff then lo = mid else hi = mid end
      end
      used = lo
    end
    if used > 0 then
      reset, whole = entry(used) + T - now, entry(1) + T - now
    end
    local k = entry(N - cost + 1)
    if not allowed and k ~= NEVER then
      retry = k + T - now
      if retry < 0 then retry = 0 end
    end
    if recorded and now + T > keep then keep = now + T end
  else
    local B = j * BLK + 17 -- the block's first byte, from 0
    local C = B + 25 -- its first count's byte, from 1
    j = j + 1
    local lo, sum, newest = 0, 0, 0
    if not fresh then lo, sum, newest = unpack('<i8i8i8', s, B + 1) end
    -- Drop: buckets dlo..dhi leave here and their slots read as zero; cleared, all of them.
    local cleared, dlo, dhi = fresh, 0, -1
    local lo2 = floor((now - T) / g)
    if lo2 > lo then
      if sum ~= 0 then
        if lo2 - lo >= NB then
          cleared, sum = true, 0
        else
          dlo, dhi = lo, lo2 - 1
          for k = lo, lo2 - 1 do sum = sum - unpack('<i8', s, C + (k % NB) * 8) end
        end
      end
      lo = lo2
    end
    if nr == 1 then
      allowed = sum + cost <= N
      recorded = mode == 1 or (allowed and mode == 0)
    end
    -- lo moves past empty buckets to the oldest that holds a grant, which leads: Reset is
    -- when it leaves. Buckets lo..newest share no slot with a dropped one.
    if sum > 0 then
      while lo < newest and unpack('<i8', s, C + (lo % NB) * 8) == 0 do lo = lo + 1 end
    end
    -- Record cost in the bucket of now, or the newest if later. A bucket holds at most N:
    -- a full one refuses alone, and the cap keeps Penalty's sums bounded and exact.
    local rk, rc, newest0 = -1, 0, newest
    if recorded then
      rk = floor(now / g)
      if rk < newest then rk = newest end
      if sum == 0 then lo = rk end -- the only bucket that holds a grant
      local slot = rk % NB
      local d = dlo + (slot - dlo % NB) % NB -- the dropped bucket in this slot, if any
      if not cleared and not (dhi >= dlo and d <= dhi) then rc = unpack('<i8', s, C + slot * 8) end
      local add = N - rc
      if add > cost then add = cost end
      if add > 0 then rc, sum = rc + add, sum + add end
      newest = rk
      local e = (newest + 1) * g + T
      if e > keep then keep = e end
      local counts = pack('<i8', rc)
      if cleared then counts = rep(ZERO, slot) .. counts .. rep(ZERO, NB - 1 - slot) end
      if fresh then
        blocks = blocks .. pack('<i8i8i8', lo, sum, newest) .. counts
      else
        if dhi >= dlo then -- zero the dropped buckets' slots, wrapping once
          local a, D = dlo % NB, dhi - dlo + 1
          local first = NB - a
          if first > D then first = D end
          call('SETRANGE', key, C - 1 + a * 8, rep(ZERO, first))
          if D > first then call('SETRANGE', key, C - 1, rep(ZERO, D - first)) end
        end
        if cleared then slot = 0 end -- all the counts
        call('SETRANGE', key, C - 1 + slot * 8, counts)
        if B == 17 then
          head0 = pack('<i8i8i8', lo, sum, newest) -- written with the key's header
        else
          call('SETRANGE', key, B, pack('<i8i8i8', lo, sum, newest))
        end
      end
    end
    -- Reset when the oldest bucket that holds a grant leaves, whole when the newest does;
    -- on a refusal, retry when enough of the oldest have left for cost more to fit.
    used = sum
    if sum > 0 then
      reset, whole = (lo + 1) * g + T - now, (newest + 1) * g + T - now
    end
    local need = sum + cost - N
    if not allowed and need > 0 then -- a rate with room reports no wait
      retry = (newest + 1) * g + T - now
      local freed = 0
      for k = lo, newest do
        if k == rk then
          freed = freed + rc
        elseif not cleared and k <= newest0 then -- buckets after the old newest hold nothing
          freed = freed + unpack('<i8', s, C + (k % NB) * 8)
        end
        if freed >= need then
          retry = (k + 1) * g + T - now
          break
        end
      end
      if retry < 0 then retry = 0 end
    end
  end
  local rem = N - used
  if rem < 0 then rem = 0 end
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

-- Write the header and the ring after a recorded request; otherwise only the latest
-- decision's time, when it moved. Expiry is cleanup only: the key must outlive keep. It is
-- set a longest period beyond that and renewed only when a grant finds it short, so an
-- expiry write is needed about once per period. E is on the key's clock; Redis counts the
-- expiry from the server's TIME, so it is set to reach E even when that clock has stepped
-- back behind the key, plus 1 ms against rounding.
if recorded then
  local renew, ms = false, 0
  if expire == 1 and E < keep then
    renew, E = true, keep + longest
    ms = math.ceil((E - tnow) / 1000) + 1
  end
  local p, w2 = pack('<i7', now), 0
  if L > 0 then w2 = (w + cost) % L end
  local head = pack('<I2i8i7', w2, now, E)
  if fresh then
    local v = head .. blocks
    if L > 0 then v = v .. rep(p, cost) .. rep(pack('<i7', NEVER), L - cost) end
    if renew then call('SET', key, v, 'PX', ms) else call('SET', key, v) end
  else
    call('SETRANGE', key, '0', head .. head0)
    if renew then call('PEXPIRE', key, ms) end
    if L > 0 then
      local first = L - w
      if cost <= first then
        call('SETRANGE', key, RING + w * 7, rep(p, cost))
      else
        call('SETRANGE', key, RING + w * 7, rep(p, first))
        call('SETRANGE', key, RING, rep(p, cost - first))
      end
    end
  end
elseif not fresh and now > last then
  call('SETRANGE', key, '2', pack('<i8', now))
end

local a = 0
if allowed then a = 1 end
return pack('<i8i8i8i8i8i8i8i8', a, dRate, dRem, dRetry, dReset, full, dRetry, now)
