-- reqlimit: the decision for a policy of SEVERAL exact rates ("10/1s,100/1m"), the same
-- answers as core.Policy.Apply, in the straight-line style of exact1.lua: one ring of the
-- last L grants (L, the largest count) serves every rate, a rate's check is one entry, its
-- Remaining a gallop from where it stood at the last grant, and the expiry is renewed about
-- once per longest period (see docs/redis.md, "Speed").
--
-- This file is a template: each include line is replaced by its fragment (fragments/),
-- where the rules shared with the other scripts are written once (see scripts.go).
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
--          (microseconds).
--#include prelude
local rep, sub = string.rep, string.sub
local arg = ARGV[1]
local useTime, now, cost, mode, ttl, L, nr = unpack('<i8i8i8i8i8i8i8', arg)
--#include clock
local key = KEYS[1]
local HDR = 9 + 2 * nr -- the entry in ring slot i starts at byte HDR + 7i
local E = 0

--#define HEAD '<I2i7'
--#define ES 7
--#define ENTRY(i) unpack('<i7', s, HDR + 1 + ($i) * 7)
--#define PACK_ENTRY(t) pack('<i7', $t)
--#define KEYNOW now
--#define HEAD_FIELDS E
--#include ring_read
--#include ring_clamp

-- Every rate must have room.
local allowed = true
for i = 1, nr do
  local N, T = unpack('<i8i8', arg, 41 + 16 * i)
  --#include exact_decide
  if not allowed then break end
end
--#include recorded
--#include exact_record

-- Per rate, the report on the state after recording; the header's new b values are
-- gathered on the way.
local dRate, dRem, dRetry, dReset, dShown, full, wait = -1, 0, 0, 0, 0, 0, 0
local bs = ''
for i = 1, nr do
  local N, T = unpack('<i8i8', arg, 41 + 16 * i)
  --#define B unpack('<I2', s, 8 + 2 * i)
  --#include ring_bound
  --#include exact_report
  if recorded then bs = bs .. pack('<I2', out) end
  --#include tightest
end

--#include exact_expiry
--#define RING_HEADER pack('<I2i7', (w0 + cost) % L, E) .. bs
--#define KEEPTTL ttl > 0
--#include ring_write

local a = 0
if allowed then a = 1 end
return $REPLY(a, dRate, dRem, dRetry, dReset, full, wait)
