-- reqlimit: the decision for a policy of ONE exact rate N/T (the common case), the same
-- answers as core.Policy.Apply (applySingle) in straight-line code: one read; the write is
-- one SET while the ring grows, two SETRANGEs once it is full, and a PEXPIRE only about
-- once per period (see docs/redis.md, "Speed").
--
-- This file is a template: each include line is replaced by its fragment (fragments/),
-- where the rules shared with the other scripts are written once (see scripts.go).
--
-- KEYS[1]  the key's state: [I2 w] [i7 E] [I2 b] then a ring of up to N grant times, i7
--            microseconds each; the next grant goes to slot w. E is the expiry last set
--            on the key, in server microseconds (0: none), so that the expiry is renewed
--            only when it would fall less than T after the newest grant. b is how many of
--            the oldest entries had left the window when the key last recorded a grant.
--            It is exactn.lua's layout for one rate.
-- ARGV[1]  seven packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= N), mode (0 enforce, 1 penalty, 2 peek), ttl (milliseconds,
--          the expiry after a grant, T rounded up; 0 = none), N, T (microseconds).
-- Returns  allowed (0/1), 0, remaining, retry, reset, full reset, wait (microseconds).
--#include prelude
local rep, sub = string.rep, string.sub
local useTime, now, cost, mode, ttl, N, T = unpack('<i8i8i8i8i8i8i8', ARGV[1])
--#include clock
local key = KEYS[1]
-- The ring holds the last N grants; the entry in slot i starts at byte HDR + 7i.
local L, HDR = N, 11
local E, b = 0, 0
--#define HEAD '<I2i7I2'
--#define HEAD_FIELDS E, b
--#define ES 7
--#define ENTRY(i) unpack('<i7', s, HDR + 1 + ($i) * 7)
--#define PACK_ENTRY(t) pack('<i7', $t)
--#define KEYNOW now
--#include ring_read

-- A new (or unreadable) key, the common case when keys are many, takes a short path: the
-- rules below for an empty ring, where the request fits (cost <= N) and a recorded one is
-- the only grant, without the steps that read or search entries.
if n == 0 then
  if mode == 2 then return $REPLY(1, 0, N, 0, 0, 0, 0) end
  local v = rep(pack('<i7', now), cost)
  if ttl > 0 then
    call('SET', key, pack('<I2i7I2', cost % N, now + 2 * ttl * 1000, 0) .. v, 'PX', 2 * ttl + 1)
  else
    call('SET', key, pack('<I2i7I2', cost % N, 0, 0) .. v)
  end
  return $REPLY(1, 0, N - cost, 0, T, T, 0)
end

--#include ring_clamp

local allowed = true
--#include exact_decide
--#include recorded
--#include exact_record

local wait = 0
--#define B b
--#include ring_bound
--#include exact_report

--#include exact_expiry
--#define RING_HEADER pack('<I2i7I2', (w0 + cost) % L, E, out)
--#define KEEPTTL ttl > 0
--#include ring_write

local a = 0
if allowed then a = 1 end
return $REPLY(a, 0, rem, retry, reset, whole, wait)
