-- reqlimit: the decision for a policy of ONE exact rate N/T (the common case), the same
-- answers as the memory store's compact log (core's applyCompact) in straight-line code:
-- one read; the write is one SET while the ring grows, two SETRANGEs once it is full (and
-- a SET first when the base moves, at most about once per period), and a PEXPIRE only
-- about once per period (see docs/redis.md, "Speed").
--
-- This file is a template: each include line is replaced by its fragment (fragments/),
-- where the rules shared with the other scripts are written once (see scripts.go).
--
-- KEYS[1]  the key's state: [I2 w] [i7 E] [I2 b] [i7 O] then a ring of up to N grant
--            times, each a uint16 offset from O in units of u microseconds (the entry v
--            is the unit O + v); the next grant goes to slot w. E is the expiry last set
--            on the key, in server microseconds (0: none), so that the expiry is renewed
--            only when it would fall less than T after the newest grant. b is how many of
--            the oldest entries had left the window when the key last recorded a grant.
-- ARGV[1]  eight packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= N), mode (0 enforce, 1 penalty, 2 peek), ttl (milliseconds,
--          the expiry after a grant, T rounded up; 0 = none), N, span (T in units, rounded
--          up), u (microseconds a unit: bounds.Unit of T).
-- Returns  allowed (0/1), 0, remaining, retry, reset, full reset, wait (microseconds).
--
-- Units keep a grant in 2 bytes, and the limit strict (core/compact.go says why): a grant
-- is recorded at its time rounded up to a unit, no earlier than it happened, and a
-- decision is judged at its time rounded down, no later than it is. Below, now is the
-- unit a grant is recorded at, fl the one the decision is judged at, and the rules run on
-- units with T the window as seen from now: span + now - fl.
--#include prelude
local rep, sub = string.rep, string.sub
local useTime, now, cost, mode, ttl, N, span, u = unpack('<i8i8i8i8i8i8i8i8', ARGV[1])
--#include clock
local fl = (now - now % u) / u
now = fl
if fl * u < tnow then now = fl + 1 end
local key = KEYS[1]
-- The ring holds the last N grants; the entry in slot i starts at byte HDR + 2i.
local L, HDR = N, 18
local E, b, O = 0, 0, 0
--#define HEAD '<I2i7I2i7'
--#define HEAD_FIELDS E, b, O
--#define ES 2
--#define ENTRY(i) (O + unpack('<I2', s, HDR + 1 + ($i) * 2))
--#define PACK_ENTRY(t) pack('<I2', $t - O)
--#define KEYNOW now * u
--#include ring_read

-- A new (or unreadable) key, the common case when keys are many, takes a short path: the
-- rules below for an empty ring, where the request fits (cost <= N) and a recorded one is
-- the only grant, without the steps that read or search entries. Its offset is span + 1,
-- as after a move of the base (below). A ring emptied by releases keeps its base, and a
-- grant is recorded no earlier than the base's unit, as core's compact log records it. E
-- is counted from the server's time, which is no later than now's unit: the expiry is
-- renewed no later than it should be.
if n == 0 then
  if mode == 2 then return $REPLY(1, 0, N, 0, 0, 0, 0) end
  if now < O then now = O end
  if ttl > 0 then E = tnow + 2 * ttl * 1000 end
  local v = pack('<I2i7I2i7', cost % N, E, 0, now - span - 1) .. rep(pack('<I2', span + 1), cost)
  if ttl > 0 then
    call('SET', key, v, 'PX', 2 * ttl + 1)
  else
    call('SET', key, v)
  end
  local t = (now + span) * u - tnow
  now = now * u
  return $REPLY(1, 0, N - cost, 0, t, t, 0)
end

--#include ring_clamp
-- A decision that follows the newest grant happens no earlier than the start of the unit
-- that grant was rounded up to.
if now - 1 > fl then fl = now - 1 end
local T = span + now - fl

local allowed = true
--#include exact_decide
--#include recorded

-- Offsets are 16 bits. When the grant's would not fit, the base moves to span + 1 units
-- before it and the entries older than span units before it are dropped, as core's compact
-- log drops them: they are out of every later window while this grant stands. What stays is rewritten as a
-- ring that starts at slot 0, so a busy key rewrites its value at most about once per
-- period. b
-- loses the dropped entries, all of which it may have counted.
if recorded and now - O > 65535 then
  local nb, kept, keep = now - span - 1, {}, 0
  for k = 0, n - 1 do -- the k-th oldest as read is in slot (w - n + k) mod L
    local v = O + unpack('<I2', s, HDR + 1 + ((w - n + k) % L) * 2) - nb
    if v > 0 then
      keep = keep + 1
      kept[keep] = pack('<I2', v)
    end
  end
  b = b - (n - keep)
  if b < 0 then b = 0 end
  n, w, O = keep, keep % L, nb
  s = sub(s, 1, HDR) .. table.concat(kept)
  -- A full ring is written in place below: first its new offsets.
  if n == L then call('SET', key, s, 'KEEPTTL') end
end
--#include exact_record

local wait = 0
--#define B b
--#include ring_bound
--#include exact_report

--#include exact_expiry

-- b must bound from below how many entries every later decision finds out of its window.
-- One after a step back of the clock is judged as early as the unit before this grant's:
-- when this decision was judged at the grant's own unit, the entries at its cutoff are
-- not counted out.
if recorded and fl == now then
  while lo > 0 and $ENTRY((base + lo - 1) % L) == cutoff do lo = lo - 1 end
  out = lo - ov
  if out < 0 then out = 0 end
end

--#define RING_HEADER pack('<I2i7I2i7', (w0 + cost) % L, E, out, O)
--#define KEEPTTL ttl > 0
--#include ring_write

-- Reported in microseconds from the request's time: a time t units after fl ends at
-- (fl + t) * u.
if reset > 0 then reset = (reset + fl) * u - tnow end
if whole > 0 then whole = (whole + fl) * u - tnow end
if retry > 0 then retry = (retry + fl) * u - tnow end
if wait > 0 then wait = (wait + fl) * u - tnow end
now = now * u
local a = 0
if allowed then a = 1 end
return $REPLY(a, 0, rem, retry, reset, whole, wait)
