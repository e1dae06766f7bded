-- reqlimit: the decision for a policy of SEVERAL bounded rates ("500/2s,2000/10s" with
-- counts above core.ExactMax), the same answers as decide.lua and core.Policy.Apply, in the
-- straight-line style of bounded1.lua and without tables or closures (each is an allocation
-- and later work for Lua's collector): one read; for a grant one SETRANGE for the headers
-- and one per rate for the counts that changed; the expiry renewed about once per period.
--
-- KEYS[1]  the key's state: [i8 last] [i7 E], then per rate [i8 lo] [i8 sum] [i8 newest],
--            then per rate NB = 101 bucket counts, i8 each. Rate j's bucket k (a granule
--            g_j of time) is counted in its slot k mod NB while lo <= k <= newest, and the
--            slot is zero once the bucket is dropped. last is the latest decision's time,
--            so time never runs backwards for the key; E is the expiry last set (server
--            microseconds, 0: none).
-- ARGV[1]  packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= every count), mode (0 enforce, 1 penalty, 2 peek), expire
--          (1: keep an expiry), the number of rates, then each rate's count, period and
--          granule (microseconds).
-- Returns  allowed (0/1), rate index, remaining, retry, reset, full reset, wait
--          (microseconds), as seven packed little-endian i8 in one string.
local unpack, pack, call, rep, floor = struct.unpack, struct.pack, redis.call, string.rep, math.floor
local arg = ARGV[1]
local useTime, now, cost, mode, expire, nr = unpack('<i8i8i8i8i8i8', arg)
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
local tnow = now -- the server's own time: expiry is counted from it
local key = KEYS[1]
local NB = 101
local HDR = 15 + 24 * nr -- rate j's counts start at byte HDR + (j-1) * NB * 8
local ZERO = '\0\0\0\0\0\0\0\0'

-- Read; anything malformed (a foreign value under our key) reads as empty.
local s = call('GET', key)
local last, E, fresh = 0, 0, true
if s and #s == HDR + nr * NB * 8 then
  last, E = unpack('<i8i7', s)
  fresh = false
else
  s = ''
end
if now < last then now = last end

-- A rate's state after dropping the buckets that no longer overlap (now-T, now]: lo, sum,
-- newest, and which buckets were dropped (dlo..dhi), or cleared (all of them). Computed
-- the same way in both passes below.
-- Pass 1: decide. Every rate must have room.
local allowed = true
for j = 1, nr do
  local N, T, g = unpack('<i8i8i8', arg, 25 + 24 * j)
  local lo, sum = 0, 0
  if not fresh then lo, sum = unpack('<i8i8', s, 16 + 24 * (j - 1)) end
  local lo2 = floor((now - T) / g)
  if lo2 > lo and sum ~= 0 then
    if lo2 - lo >= NB then
      sum = 0
    else
      local at = HDR + (j - 1) * NB * 8 + 1
      for k = lo, lo2 - 1 do sum = sum - unpack('<i8', s, at + (k % NB) * 8) end
    end
  end
  if sum + cost > N then
    allowed = false
    break
  end
end
local recorded = mode == 1 or (allowed and mode == 0)

-- Pass 2: per rate, drop, record, report (as core.Policy.report) and write the counts
-- that changed; the headers are gathered and written after.
local dRate, dRem, dRetry, dReset, full, wait = -1, 0, 0, 0, 0, 0
local hs, keep, longest = '', 0, 0
for j = 1, nr do
  local N, T, g = unpack('<i8i8i8', arg, 25 + 24 * j)
  if T > longest then longest = T end
  local at = HDR + (j - 1) * NB * 8 + 1 -- 1-based position of slot 0
  local lo, sum, newest = 0, 0, 0
  if not fresh then lo, sum, newest = unpack('<i8i8i8', s, 16 + 24 * (j - 1)) end
  local cleared = fresh
  local dlo, dhi = 0, -1 -- buckets dropped now; their slots read as zero
  local lo2 = floor((now - T) / g)
  if lo2 > lo then
    if sum ~= 0 then
      if lo2 - lo >= NB then
        cleared, sum = true, 0
      else
        dlo, dhi = lo, lo2 - 1
        for k = lo, lo2 - 1 do sum = sum - unpack('<i8', s, at + (k % NB) * 8) end
      end
    end
    lo = lo2
  end
  -- The grant's bucket and its count after recording (rk = -1: none).
  local rk, rc, newest0 = -1, 0, newest
  if recorded then
    rk = floor(now / g)
    if rk < newest then rk = newest end
    local i = rk % NB
    local d = dlo + (i - dlo % NB) % NB -- the dropped bucket in slot i, if any
    if not cleared and not (dhi >= dlo and d <= dhi) then rc = unpack('<i8', s, at + i * 8) end
    -- A bucket holds at most N (as core's record).
    local add = N - rc
    if add > cost then add = cost end
    if add > 0 then
      rc = rc + add
      sum = sum + add
    end
    newest = rk
  end

  -- Report.
  local reset, retry = 0, 0
  if sum > 0 then reset = (newest + 1) * g + T - now end
  local need = sum + cost - N
  if not allowed and need > 0 then -- a rate with room reports no wait, as in core
    retry = (newest + 1) * g + T - now
    if retry < 0 then retry = 0 end
    local freed = 0
    for k = lo, newest do
      if k == rk then
        freed = freed + rc
      elseif not cleared and k <= newest0 then -- buckets after the old newest hold nothing
        freed = freed + unpack('<i8', s, at + (k % NB) * 8)
      end
      if freed >= need then
        retry = (k + 1) * g + T - now
        if retry < 0 then retry = 0 end
        break
      end
    end
    if retry > wait then wait = retry end
  end
  local rem = N - sum
  if rem < 0 then rem = 0 end
  local tighter
  if dRate < 0 then
    tighter = true
  elseif not allowed then
    tighter = retry > dRetry or (retry == dRetry and rem < dRem)
  else
    tighter = rem < dRem or (rem == dRem and reset > dReset)
  end
  if tighter then
    dRate, dRem, dRetry, dReset = j - 1, rem, retry, reset
  end
  if reset > full then full = reset end

  -- Write this rate's counts that changed: all of them when cleared (or new), else the
  -- slots from the first dropped bucket's through the grant's, which sit side by side
  -- modulo NB (bucket newest-100 shares the grant's slot or sits just after it).
  if recorded then
    hs = hs .. pack('<i8i8i8', lo, sum, newest)
    local e = (newest + 1) * g + T
    if e > keep then keep = e end
    local i = rk % NB
    if cleared then
      if not fresh then
        call('SETRANGE', key, at - 1, rep(ZERO, i) .. pack('<i8', rc) .. rep(ZERO, NB - 1 - i))
      end
    elseif dhi < dlo then
      call('SETRANGE', key, at - 1 + i * 8, pack('<i8', rc))
    else
      -- The changed slots: the dropped buckets' run (D slots from a) and the grant's slot
      -- i, which is in the run or near one end of it. One run of slots covers them,
      -- starting at a or at i, whichever is shorter, wrapping at most once.
      local a, D = dlo % NB, dhi - dlo + 1
      local start, span = a, D
      local off = (i - a) % NB
      if off >= D then
        if off + 1 <= NB - off + D then
          span = off + 1
        else
          start, span = i, NB - off + D
        end
      end
      local piece, pstart = '', start
      for x = 0, span - 1 do
        local slot = (start + x) % NB
        local v = 0
        if slot == i then
          v = rc
        elseif (slot - a) % NB >= D then
          v = unpack('<i8', s, at + slot * 8)
        end
        piece = piece .. pack('<i8', v)
        if slot == NB - 1 and x < span - 1 then -- wraps: write what reaches the end
          call('SETRANGE', key, at - 1 + pstart * 8, piece)
          piece, pstart = '', 0
        end
      end
      call('SETRANGE', key, at - 1 + pstart * 8, piece)
    end
  end
end

-- Headers, and the whole value for a new key. Expiry is cleanup only: the key must outlive
-- the end of every rate's newest bucket by its period (keep); it is set a longest period
-- beyond that and renewed only when a grant finds it short, counted from the server's TIME
-- plus 1 ms (see bounded1.lua).
if recorded then
  local renew = expire == 1 and E < keep
  if renew then E = keep + longest end
  local ms = math.ceil((E - tnow) / 1000) + 1
  if fresh then
    local parts = pack('<i8i7', now, E) .. hs
    for j = 1, nr do
      local i = (unpack('<i8', hs, 17 + 24 * (j - 1))) % NB -- newest's slot
      parts = parts .. rep(ZERO, i) .. pack('<i8', cost) .. rep(ZERO, NB - 1 - i)
    end
    if renew then
      call('SET', key, parts, 'PX', ms)
    else
      call('SET', key, parts)
    end
  else
    call('SETRANGE', key, '0', pack('<i8i7', now, E) .. hs)
    if renew then call('PEXPIRE', key, ms) end
  end
elseif not fresh and now > last then
  call('SETRANGE', key, '0', pack('<i8', now))
end

local ok = 0
if allowed then ok = 1 end
return pack('<i8i8i8i8i8i8i8', ok, dRate, dRem, dRetry, dReset, full, wait)
