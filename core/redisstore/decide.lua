-- reqlimit: the decision for a policy that mixes exact and bounded rates ("5/1s,1000/1m"),
-- one sliding-window decision for one key, atomically (see docs/redis.md): the exact rates
-- as in exactn.lua, the bounded ones as in boundedn.lua, in one pass over the rates to
-- decide and another to record and report.
--
-- This file is a template: each include line is replaced by its fragment (fragments/),
-- where the rules shared with the other scripts are written once (see scripts.go).
--
-- KEYS[1]  the key's state: a packed string, little-endian,
--            [I2 w] [i8 last]
--            per bounded rate: [i8 lo][i8 sum][i8 newest][i8 counts x NB]
--            ring: up to L grant times, i7 (7-byte signed) microseconds each, +-1142 years;
--            the next grant goes to slot w. 7 bytes rather than 8 keep 100 grants in a
--            smaller allocation class (MEMORY USAGE 856 rather than 984 bytes).
--          The ring holds only real grants, so a key that saw 3 grants stores 3 entries.
-- ARGV[1] packed i8 values (ARGV[2], their struct format, is not read): use TIME (1) or the
--          given now, now (microseconds), cost, mode (0 enforce, 1 penalty, 2 peek), expire
--          (1 = set PEXPIRE), L, BoundedBuckets, the number of rates, then per rate: count,
--          period (microseconds), granule (microseconds; 0 = exact rate).
-- Returns  allowed (0/1), rate index, remaining, retry, reset, full reset, wait (microseconds).
--#include prelude
local floor, rep, sub = math.floor, string.rep, string.sub
local arg = ARGV[1]
local useTime, now, cost, mode, expire, L, NB, nr = unpack('<i8i8i8i8i8i8i8i8', arg)
--#include clock
local key = KEYS[1]
NB = NB + 1
local ZERO = '\0\0\0\0\0\0\0\0'
local BLK = (3 + NB) * 8 -- a bounded rate's block
local nb = 0 -- bounded rates
for i = 1, nr do
  if unpack('<i8', arg, 57 + 24 * i) > 0 then nb = nb + 1 end
end
local HDR = 10 + nb * BLK -- the entry in ring slot i starts at byte HDR + 7i
local last = 0

--#define HEAD '<I2i8'
--#define ES 7
--#define ENTRY(i) unpack('<i7', s, HDR + 1 + ($i) * 7)
--#define PACK_ENTRY(t) pack('<i7', $t)
--#define HEAD_FIELDS last
--#include ring_read
local fresh = s == ''
--#include ring_clamp
if now < last then now = last end

-- Pass 1: every rate must have room.
local allowed = true
local j = 0 -- bounded rates so far
for i = 1, nr do
  local N, T, g = unpack('<i8i8i8', arg, 41 + 24 * i)
  if g == 0 then
    --#include exact_decide
  else
    local at = 35 + j * BLK -- the rate's first count's byte, from 1
    j = j + 1
    local lo, sum = 0, 0
    if not fresh then lo, sum = unpack('<i8i8', s, at - 24) end
    --#include bounded_drop
    --#include bounded_decide
  end
end
--#include recorded
--#include exact_record

-- Pass 2: per rate, record and report, and write each bounded rate's block: in place while
-- the ring is full, else gathered in blocks for the whole value, which the ring's growth
-- makes a SET.
local grow = recorded and n < L
local blocks = ''
local dRate, dRem, dRetry, dReset, dShown, full, wait = -1, 0, 0, 0, 0, 0, 0
j = 0
for i = 1, nr do
  local N, T, g = unpack('<i8i8i8', arg, 41 + 24 * i)
  if g == 0 then
    local lo = 0 -- no bound is kept: the search starts from the oldest entry
    --#include exact_report
    --#include tightest
  else
    local at = 35 + j * BLK
    j = j + 1
    local lo, sum, newest = 0, 0, 0
    if not fresh then lo, sum, newest = unpack('<i8i8i8', s, at - 24) end
    --#include bounded_drop
    --#include bounded_lead
    --#include bounded_record
    --#include bounded_report
    --#include tightest
    local region = '' -- the block's counts for the whole value
    if grow and not fresh then region = sub(s, at, at - 1 + NB * 8) end
    --#define PUT_COUNTS if grow then region = sub(region, 1, pstart * 8) .. piece .. sub(region, pstart * 8 + #piece + 1) else call('SETRANGE', key, at - 1 + pstart * 8, piece) end
    --#include bounded_counts
    if recorded then
      if grow then
        blocks = blocks .. pack('<i8i8i8', lo, sum, newest) .. region
      else
        call('SETRANGE', key, at - 25, pack('<i8i8i8', lo, sum, newest))
      end
    end
  end
end

-- Expiry is cleanup only: it falls when the key holds nothing any window counts. full is
-- on the key's clock (clamped to its newest grant); the expiry Redis counts starts from the
-- server's TIME, so it is set to reach now + full even when the server's clock has stepped
-- back behind the key, plus 1 ms against rounding.
local renew, ms = recorded and expire == 1, 0
if renew then
  ms = math.ceil((now - tnow + full) / 1000) + 1
end
--#define RING_HEADER pack('<I2i8', (w0 + cost) % L, now) .. blocks
--#define KEEPTTL false
--#include ring_write
if not recorded and not fresh and now > last then
  call('SETRANGE', key, '2', pack('<i8', now))
end

local a = 0
if allowed then a = 1 end
return $REPLY(a, dRate, dRem, dRetry, dReset, full, wait)
