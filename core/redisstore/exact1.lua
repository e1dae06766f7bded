-- reqlimit: the decision for a policy of ONE exact rate N/T (the common case), the same
-- answers as decide.lua and core.Policy.Apply (applySingle) in straight-line code: no
-- tables, no closures, one read; the write is one SET while the ring grows, two SETRANGEs
-- once it is full, and a PEXPIRE only about once per period (see docs/redis.md, "Speed").
--
-- KEYS[1]  the key's state: [I2 w] [i7 E] [I2 b] then a ring of up to N grant times, i7
--            microseconds each; the next grant goes to slot w. E is the expiry last set
--            on the key, in server microseconds (0: none), so that the expiry is renewed
--            only when it would fall less than T after the newest grant. b is how many of
--            the oldest entries had left the window when the key last recorded a grant.
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
local HDR = 11 -- header bytes; the entry in ring slot i starts at byte HDR + 7i
local E, b = 0, 0

-- Read; anything malformed (a foreign value under our key) reads as empty.
local s = call('GET', key)
local w, n = 0, 0
if s then
  local len = #s
  if len >= HDR and (len - HDR) % 7 == 0 and len <= HDR + 7 * N then
    local n0 = (len - HDR) / 7
    local w0, E0, b0 = unpack('<I2i7I2', s)
    if (n0 < N and w0 == n0) or (n0 == N and w0 < N) then
      w, n, E, b = w0, n0, E0, b0
      if b > n then b = 0 end -- 0 is always a safe start for the search below
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
    call('SET', key, pack('<I2i7I2', cost % N, now + 2 * ttl * 1000, 0) .. v, 'PX', 2 * ttl + 1)
  else
    call('SET', key, pack('<I2i7I2', cost % N, 0, 0) .. v)
  end
  return pack('<i8i8i8i8i8i8i8', 1, 0, N - cost, 0, T, T, 0)
end

-- Entries by age: the k-th oldest (k = 0 .. n-1) is in slot (base + k) mod N, whether the
-- ring is full (base = w) or still growing (w = n, base = 0).
local base = (w - n) % N

-- Time never runs backwards for a key: clamp to the newest grant.
local newest = unpack('<i7', s, HDR + 1 + ((w - 1) % N) * 7)
if now < newest then now = newest end
local cutoff = now - T

-- B: how many of the oldest entries are at or before cutoff (out of the window). The
-- stored b is a lower bound: it was counted when the newest grant was made, and cutoff
-- has not moved back since (now >= newest). Gallop up from b, then halve: a busy key's
-- window has moved by an entry or two since, so this reads two or three entries where a
-- search of the whole ring would read seven or eight.
local lo, hi = b, n -- entries older than lo are out; entries from hi on are in
local step = 1
while true do
  local k = lo + step - 1
  if k >= hi then break end
  if unpack('<i7', s, HDR + 1 + ((base + k) % N) * 7) <= cutoff then
    lo, step = k + 1, step * 2
  else
    hi = k
    break
  end
end
while lo < hi do
  local mid = (lo + hi) / 2
  mid = mid - mid % 1 -- floor, without a call
  if unpack('<i7', s, HDR + 1 + ((base + mid) % N) * 7) <= cutoff then lo = mid + 1 else hi = mid end
end
local B = lo

-- Decide: the window holds n - B grants; cost more must fit in N.
local allowed = n - B + cost <= N

-- Record: cost entries at now from slot w, overwriting the oldest ov (once the ring is
-- full). While the ring grows, the whole value with one SET (it is short then); once it
-- is full, the changed bytes with SETRANGE: building a long string in Lua and handing it
-- to SET costs more than the extra call.
--
-- Expiry is cleanup only: the key must outlive its newest grant by T (ttl). Renewing it
-- on every grant would cost a PEXPIRE (or SET's PX) each time, the dearest part of a
-- write, so it is set to twice that and renewed only when less than ttl is left: a key
-- then expires between T and 2T after its newest grant, never sooner. E is on the key's
-- clock (clamped to its newest grant); the expiry Redis counts starts from the server's
-- TIME, so it is set to reach E even when the server's clock has stepped back behind the
-- key, plus 1 ms against rounding and the few microseconds between the script's start and
-- TIME.
local m, ov = 0, 0
if mode == 1 or (allowed and mode == 0) then
  m = cost
  ov = n + cost - N
  if ov < 0 then ov = 0 end
  local Bafter = B - ov
  if Bafter < 0 then Bafter = 0 end
  local p = pack('<i7', now)
  local renew = ttl > 0 and E < now + ttl * 1000
  local ms = 0
  if renew then
    E = now + 2 * ttl * 1000
    ms = math.ceil((E - tnow) / 1000) + 1
  end
  local w0 = w
  w = (w + cost) % N
  if n == N then
    call('SETRANGE', key, '0', pack('<I2i7I2', w, E, Bafter))
    if renew then call('PEXPIRE', key, ms) end
    local first = N - w0
    if cost <= first then
      call('SETRANGE', key, HDR + w0 * 7, rep(p, cost))
    else
      call('SETRANGE', key, HDR + w0 * 7, rep(p, first))
      call('SETRANGE', key, '11', rep(p, cost - first))
    end
  else
    local first, ring = N - w0, nil
    if cost <= first then
      ring = sub(s, HDR + 1, HDR + w0 * 7) .. rep(p, cost)
    else -- the grant wraps round: the ring is full afterwards
      local second = cost - first
      ring = rep(p, second) .. sub(s, HDR + 1 + second * 7, HDR + w0 * 7) .. rep(p, first)
    end
    local v = pack('<I2i7I2', w, E, Bafter) .. ring
    if renew then
      call('SET', key, v, 'PX', ms)
    elseif ttl > 0 then
      call('SET', key, v, 'KEEPTTL')
    else
      call('SET', key, v)
    end
  end
end

-- Report, as core.Policy.report, on the state after recording: its n + m - ov entries,
-- the oldest B - ov of them (at least 0) out of the window, the m newest at now. An entry
-- of age q there that is not new is the entry of age q + ov before, read from s, which
-- still holds the value as it was read.
local nAfter = n + m - ov
local out = B - ov
if out < 0 then out = 0 end
local used = nAfter - out
local reset = 0
if m > 0 then
  reset = T -- the newest entry is now
elseif used > 0 then
  reset = newest + T - now
end
if allowed then
  return pack('<i8i8i8i8i8i8i8', 1, 0, N - used, 0, reset, reset, 0)
end
-- Refused: admission waits for the (N-cost+1)-th most recent grant to leave the window.
local retry = 0
local q = nAfter - (N - cost + 1)
if q >= 0 then
  if q >= nAfter - m then
    retry = T
  else
    retry = unpack('<i7', s, HDR + 1 + ((base + q + ov) % N) * 7) + T - now
    if retry < 0 then retry = 0 end
  end
end
return pack('<i8i8i8i8i8i8i8', 0, 0, N - used, retry, reset, reset, retry)
