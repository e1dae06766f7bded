-- reqlimit: the decision for a policy of ONE exact rate N/T (the common case), the same
-- answers as decide.lua and core.Policy.Apply (applySingle) in straight-line code: no
-- tables, no closures, one read; the write is one SET while the ring grows, two SETRANGEs
-- once it is full, and a PEXPIRE only about once per period (see docs/redis.md, "Speed").
--
-- KEYS[1]  the key's state: [I2 w] [i7 E] then a ring of up to N grant times, i7
--            microseconds each; the next grant goes to slot w. E is the expiry last set
--            on the key, in server microseconds (0: none), so that the expiry is renewed
--            only when it would fall less than T after the newest grant.
-- ARGV[1]  seven packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= N), mode (0 enforce, 1 penalty, 2 peek), ttl (milliseconds,
--          the expiry after a grant, T rounded up; 0 = none), N, T (microseconds).
-- Returns  allowed (0/1), 0, remaining, retry, reset, full reset, wait (microseconds), as
--          seven packed little-endian i8 in one string: converting a table of seven
--          numbers to a reply costs the server more than the rest of a short decision.
--
-- Every step costs: Redis's Lua interprets each global lookup, table index and call, so
-- library functions are held in locals, and a new key (the common case when keys are
-- many) takes a short path of its own.
local unpack, pack, call, rep, sub = struct.unpack, struct.pack, redis.call, string.rep, string.sub
local useTime, now, cost, mode, ttl, N, T = unpack('<i8i8i8i8i8i8i8', ARGV[1])
if useTime == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
end
-- The server's own time: expiry is counted from it, even after now is clamped forward.
local tnow = now
local key = KEYS[1]
local NEVER = -9007199254740992
local E = 0

-- Read; anything malformed (a foreign value under our key) reads as empty.
local s = call('GET', key)
local w, n = 0, 0
if s then
  local len = #s
  if len >= 9 and (len - 9) % 7 == 0 and len <= 9 + 7 * N then
    local n0 = (len - 9) / 7
    local w0, E0 = unpack('<I2i7', s)
    if (n0 < N and w0 == n0) or (n0 == N and w0 < N) then
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

-- A new (or unreadable) key: the request fits (cost <= N) and is the only grant.
if n == 0 then
  if mode == 2 then return pack('<i8i8i8i8i8i8i8', 1, 0, N, 0, 0, 0, 0) end
  local v = rep(pack('<i7', now), cost)
  if ttl > 0 then
    call('SET', key, pack('<I2i7', cost % N, now + 2 * ttl * 1000) .. v, 'PX', 2 * ttl + 1)
  else
    call('SET', key, pack('<I2i7', cost % N, 0) .. v)
  end
  return pack('<i8i8i8i8i8i8i8', 1, 0, N - cost, 0, T, T, 0)
end

-- Time never runs backwards for a key: clamp to the newest grant.
if n > 0 then
  local i = w - 1
  if i < 0 then i = i + N end
  local newest = unpack('<i7', s, 10 + i * 7)
  if now < newest then now = newest end
end

-- Decide: the (N-cost+1)-th most recent grant must be at least T old.
local cutoff = now - T
local allowed = true
do
  local i = w - (N - cost + 1)
  if i < 0 then i = i + N end
  if i < n and unpack('<i7', s, 10 + i * 7) > cutoff then allowed = false end
end

-- Record: cost entries at now from slot w. While the ring grows, the whole value with one
-- SET (it is short then); once it is full, the changed bytes with SETRANGE: building a
-- long string in Lua and handing it to SET costs more than the extra call. Afterwards
-- slots w0 .. w0+m-1 (mod N) hold now, and entries are read from s with them patched in.
--
-- Expiry is cleanup only: the key must outlive its newest grant by T (ttl). Renewing it
-- on every grant would cost a PEXPIRE (or SET's PX) each time, the dearest part of a
-- write, so it is set to twice that and renewed only when less than ttl is left: a key
-- then expires between T and 2T after its newest grant, never sooner. E is on the key's
-- clock (clamped to its newest grant); the expiry Redis counts starts from the server's
-- TIME, so it is set to reach E even when the server's clock has stepped back behind the
-- key, plus 1 ms against rounding and the few microseconds between the script's start and
-- TIME.
local w0, m = w, 0
if mode == 1 or (allowed and mode == 0) then
  local p = pack('<i7', now)
  local renew = ttl > 0 and E < now + ttl * 1000
  local ms = 0
  if renew then
    E = now + 2 * ttl * 1000
    ms = math.ceil((E - tnow) / 1000) + 1
  end
  if n == N then
    m = cost
    w = (w + cost) % N
    if renew then
      call('SETRANGE', key, '0', pack('<I2i7', w, E))
      call('PEXPIRE', key, ms)
    else
      call('SETRANGE', key, '0', pack('<I2', w))
    end
    local first = N - w0
    if cost <= first then
      call('SETRANGE', key, 9 + w0 * 7, rep(p, cost))
    else
      call('SETRANGE', key, 9 + w0 * 7, rep(p, first))
      call('SETRANGE', key, '9', rep(p, cost - first))
    end
  else
    local first = N - w
    if cost <= first then
      s = sub(s, 10, 9 + w * 7) .. rep(p, cost) .. sub(s, 10 + (w + cost) * 7)
    else -- the grant wraps round: the ring is full afterwards
      local second = cost - first
      s = rep(p, second) .. sub(s, 10 + second * 7, 9 + w * 7) .. rep(p, first)
    end
    n = #s / 7
    w = (w + cost) % N
    s = pack('<I2i7', w, E) .. s
    if renew then
      call('SET', key, s, 'PX', ms)
    elseif ttl > 0 then
      call('SET', key, s, 'KEEPTTL')
    else
      call('SET', key, s)
    end
  end
end

-- Report, as core.Policy.report, on the state after recording: used is the number of
-- grants after cutoff among the last N, by binary search (entries get older with k).
-- An entry at slot i is now when (i - w0) mod N < m, else read from s.
local used = 0
if n > 0 then
  local i = w - N
  if i < 0 then i = i + N end
  local d = i - w0
  if d < 0 then d = d + N end
  if i < n and (d < m or unpack('<i7', s, 10 + i * 7) > cutoff) then
    used = N
  else
    local lo, hi = 0, n
    if hi > N - 1 then hi = N - 1 end
    while lo < hi do
      local mid = (lo + hi + 1) / 2
      mid = mid - mid % 1 -- floor, without a call
      i = w - mid
      if i < 0 then i = i + N end
      d = i - w0
      if d < 0 then d = d + N end
      if d < m or unpack('<i7', s, 10 + i * 7) > cutoff then lo = mid else hi = mid - 1 end
    end
    used = lo
  end
end
local reset = 0
if m > 0 then
  reset = T -- the newest entry is now
elseif used > 0 then
  local i = w - 1
  if i < 0 then i = i + N end
  reset = unpack('<i7', s, 10 + i * 7) + T - now
end
if allowed then
  return pack('<i8i8i8i8i8i8i8', 1, 0, N - used, 0, reset, reset, 0)
end
local retry = 0
local i = w - (N - cost + 1)
if i < 0 then i = i + N end
if i < n then
  local d = i - w0
  if d < 0 then d = d + N end
  if d < m then
    retry = T
  else
    retry = unpack('<i7', s, 10 + i * 7) + T - now
    if retry < 0 then retry = 0 end
  end
end
return pack('<i8i8i8i8i8i8i8', 0, 0, N - used, retry, reset, reset, retry)
