-- reqlimit: the decision for a policy of SEVERAL bounded rates ("500/2s,2000/10s" with
-- counts above core.ExactMax), the same answers as core.Policy.Apply, in the straight-line
-- style of bounded1.lua: one read; for a grant one SETRANGE for the headers and one per
-- rate for the counts that changed; the expiry renewed about once per period.
--
-- This file is a template: each include line is replaced by its fragment (fragments/),
-- where the rules shared with the other scripts are written once (see scripts.go).
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
--          (microseconds).
--#include prelude
local floor, rep = math.floor, string.rep
local arg = ARGV[1]
local useTime, now, cost, mode, expire, nr = unpack('<i8i8i8i8i8i8', arg)
--#include clock
local key = KEYS[1]
local NB, ZERO = 101, '\0\0\0\0\0\0\0\0'
local HDR = 15 + 24 * nr -- rate i's counts start at byte HDR + (i-1) * NB * 8

-- Read; anything malformed (a foreign value under our key) reads as new, and s as ''.
local s = call('GET', key)
local last, E, fresh = 0, 0, true
if s and #s == HDR + nr * NB * 8 then
  last, E = unpack('<i8i7', s)
  fresh = false
else
  s = ''
end
if now < last then now = last end

-- Pass 1: every rate must have room.
local allowed = true
for i = 1, nr do
  local N, T, g = unpack('<i8i8i8', arg, 25 + 24 * i)
  local at = HDR + (i - 1) * NB * 8 + 1 -- the rate's first count's byte, from 1
  local lo, sum = 0, 0
  if not fresh then lo, sum = unpack('<i8i8', s, 16 + 24 * (i - 1)) end
  --#include bounded_drop
  --#include bounded_decide
  if not allowed then break end
end
--#include recorded

-- Pass 2: per rate, the same drop, then record, report and write the counts that changed;
-- the headers are gathered and written after.
local dRate, dRem, dRetry, dReset, dShown, full, wait = -1, 0, 0, 0, 0, 0, 0
local hs, cs, keep, longest = '', '', 0, 0 -- cs: a new key's counts
for i = 1, nr do
  local N, T, g = unpack('<i8i8i8', arg, 25 + 24 * i)
  local at = HDR + (i - 1) * NB * 8 + 1
  local lo, sum, newest = 0, 0, 0
  if not fresh then lo, sum, newest = unpack('<i8i8i8', s, 16 + 24 * (i - 1)) end
  --#include bounded_drop
  --#include bounded_lead
  --#include bounded_record
  --#include bounded_report
  --#include tightest
  --#define PUT_COUNTS if fresh then cs = cs .. piece else call('SETRANGE', key, at - 1 + pstart * 8, piece) end
  --#include bounded_counts
  if recorded then hs = hs .. pack('<i8i8i8', lo, sum, newest) end
  --#include bounded_keep
end

--#define HEADER pack('<i8i7', now, E) .. hs
--#include bounded_write

local ok = 0
if allowed then ok = 1 end
return $REPLY(ok, dRate, dRem, dRetry, dReset, full, wait)
