-- reqlimit: the decision for a policy of ONE bounded rate N/T (Count above core.ExactMax),
-- the same answers as decide.lua and core.Policy.Apply, in straight-line code: one read,
-- and for a grant two SETRANGEs (the header, then the counts that changed, which sit side
-- by side) and a PEXPIRE only about once per period (see docs/redis.md, "Speed").
--
-- KEYS[1]  the key's state: [i8 last] [i8 lo] [i8 sum] [i8 newest] [i7 E] then NB = 101
--            bucket counts, i8 each: bucket k (a granule g of time, T/100 rounded up) is
--            counted in slot k mod NB while lo <= k <= newest, and its slot is zero once
--            it is dropped. last is the latest decision's time, so time never runs
--            backwards for the key; E is the expiry last set (server microseconds, 0: none).
-- ARGV[1]  eight packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= N), mode (0 enforce, 1 penalty, 2 peek), expire (1: keep an
--          expiry), N, T, g (microseconds).
-- Returns  allowed (0/1), 0, remaining, retry, reset, full reset, wait (microseconds), as
--          seven packed little-endian i8 in one string: converting a table of seven
--          numbers to a reply costs the server more than the rest of a short decision.
--
-- Library functions are held in locals: Redis's Lua interprets every global lookup.
local unpack, pack, call, floor = struct.unpack, struct.pack, redis.call, math.floor
local useTime, now, cost, mode, expire, N, T, g = unpack('<i8i8i8i8i8i8i8i8', ARGV[1])
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- The server's own time: expiry is counted from it, even after now is clamped forward.
local tnow = now
local key = KEYS[1]
local NB, HDR = 101, 39

-- Read; anything malformed (a foreign value under our key) reads as empty.
local s = call('GET', key)
local last, lo, sum, newest, E = 0, 0, 0, 0, 0
local fresh = true
if s and #s == HDR + NB * 8 then
  last, lo, sum, newest, E = unpack('<i8i8i8i8i7', s)
  fresh = false
end
-- cnt holds the counts changed so far, by slot; cleared means every other slot reads 0.
local cnt, cleared = {}, fresh
local function count(i)
  local c = cnt[i]
  if c then return c end
  if cleared then return 0 end
  return (unpack('<i8', s, HDR + i * 8 + 1))
end

if now < last then now = last end

-- Drop the buckets that no longer overlap (now-T, now].
local lo2 = floor((now - T) / g)
if lo2 > lo then
  if sum ~= 0 then
    if lo2 - lo >= NB then
      cnt, cleared, sum = {}, true, 0
    else
      for k = lo, lo2 - 1 do
        local i = k % NB
        local c = count(i)
        if c ~= 0 then
          sum = sum - c
          cnt[i] = 0
        end
      end
    end
  end
  lo = lo2
end

local allowed = sum + cost <= N
local recorded = mode == 1 or (allowed and mode == 0)
if recorded then
  local k = floor(now / g)
  if k < newest then k = newest end
  local i = k % NB
  -- A bucket holds at most N (as core's record): a full one refuses alone, and the cap
  -- keeps Penalty's sums bounded and exact.
  local c = count(i)
  local add = N - c
  if add > cost then add = cost end
  if add > 0 then
    cnt[i] = c + add
    sum = sum + add
  end
  newest = k
end

-- Report, as core.Policy.report for a bounded rate.
local reset, retry = 0, 0
if sum > 0 then reset = (newest + 1) * g + T - now end
local need = sum + cost - N
if not allowed and need > 0 then
  retry = math.max(0, (newest + 1) * g + T - now)
  local freed = 0
  for k = lo, newest do
    freed = freed + count(k % NB)
    if freed >= need then
      retry = math.max(0, (k + 1) * g + T - now)
      break
    end
  end
end
local rem = N - sum
if rem < 0 then rem = 0 end

-- Write. Expiry is cleanup only: the key must outlive the end of its newest bucket by T.
-- It is set one period beyond that and renewed only when a grant finds it short, so an
-- expiry write is needed about once per period rather than on every grant. E is on the
-- key's clock (clamped to last); Redis counts the expiry from the server's TIME, so it is
-- set to reach E even when that clock has stepped back behind the key, plus 1 ms against
-- rounding and the microseconds between the script's start and TIME.
if recorded then
  local keep = (newest + 1) * g + T
  local renew = expire == 1 and E < keep
  if renew then E = keep + T end
  local ms = math.ceil((E - tnow) / 1000) + 1
  if fresh or cleared then
    local parts = {pack('<i8i8i8i8i7', now, lo, sum, newest, E)}
    for i = 0, NB - 1 do parts[i + 2] = pack('<i8', cnt[i] or 0) end
    local v = table.concat(parts)
    if renew then
      call('SET', key, v, 'PX', ms)
    elseif expire == 1 then
      call('SET', key, v, 'KEEPTTL')
    else
      call('SET', key, v)
    end
  else
    if renew then
      call('SETRANGE', key, '0', pack('<i8i8i8i8i7', now, lo, sum, newest, E))
    else
      call('SETRANGE', key, '0', pack('<i8i8i8i8', now, lo, sum, newest))
    end
    -- The changed slots: the new grant's and, when buckets were dropped, the ones just
    -- after it (bucket newest-100 sits in slot newest+1 mod 101). One SETRANGE spans them.
    local a, b = NB, -1
    for i in pairs(cnt) do
      if i < a then a = i end
      if i > b then b = i end
    end
    local parts = {}
    for i = a, b do parts[i - a + 1] = pack('<i8', count(i)) end
    call('SETRANGE', key, HDR + a * 8, table.concat(parts))
    if renew then call('PEXPIRE', key, ms) end
  end
elseif not fresh and now > last then
  call('SETRANGE', key, '0', pack('<i8', now))
end

local a = 0
if allowed then a = 1 end
return pack('<i8i8i8i8i8i8i8', a, 0, rem, retry, reset, reset, retry)
