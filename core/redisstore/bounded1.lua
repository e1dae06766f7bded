-- reqlimit: the decision for a policy of ONE bounded rate N/T (Count above core.ExactMax),
-- the same answers as core.Policy.Apply, in straight-line code: one read, and for a grant
-- two SETRANGEs (the counts that changed, which sit side by side, then the header) and a
-- PEXPIRE only about once per period (see docs/redis.md, "Speed").
--
-- This file is a template: each include line is replaced by its fragment (fragments/),
-- where the rules shared with the other scripts are written once (see scripts.go).
--
-- KEYS[1]  the key's state: [i8 last] [i8 lo] [i8 sum] [i8 newest] [i7 E] then NB = 101
--            bucket counts, i8 each: bucket k (a granule g of time, T/100 rounded up) is
--            counted in slot k mod NB while lo <= k <= newest, and its slot is zero once
--            it is dropped. last is the latest decision's time, so time never runs
--            backwards for the key; E is the expiry last set (server microseconds, 0: none).
-- ARGV[1]  eight packed little-endian i8: use TIME (1) or the given now, now (microseconds),
--          cost (1 <= cost <= N), mode (0 enforce, 1 penalty, 2 peek), expire (1: keep an
--          expiry), N, T, g (microseconds).
-- Returns  allowed (0/1), 0, remaining, retry, reset, full reset, wait (microseconds).
--#include prelude
local floor, rep = math.floor, string.rep
local useTime, now, cost, mode, expire, N, T, g = unpack('<i8i8i8i8i8i8i8i8', ARGV[1])
--#include clock
local key = KEYS[1]
local NB, ZERO = 101, '\0\0\0\0\0\0\0\0'
local at = 40 -- the first count's byte, from 1: after the 39-byte header

-- Read; anything malformed (a foreign value under our key) reads as new, and s as ''.
local s = call('GET', key)
local last, lo, sum, newest, E, fresh = 0, 0, 0, 0, 0, true
if s and #s == at - 1 + NB * 8 then
  last, lo, sum, newest, E = unpack('<i8i8i8i8i7', s)
  fresh = false
else
  s = ''
end
if now < last then now = last end

local allowed, wait = true, 0
--#include bounded_drop
--#include bounded_lead
--#include bounded_decide
--#include recorded
--#include bounded_record
--#include bounded_report
local cs = '' -- a new key's counts
--#define PUT_COUNTS if fresh then cs = cs .. piece else call('SETRANGE', key, at - 1 + pstart * 8, piece) end
--#include bounded_counts
local keep, longest = 0, 0
--#include bounded_keep
--#define HEADER pack('<i8i8i8i8i7', now, lo, sum, newest, E)
--#include bounded_write

local a = 0
if allowed then a = 1 end
return $REPLY(a, 0, rem, retry, reset, whole, wait)
