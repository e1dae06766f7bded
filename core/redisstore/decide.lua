-- reqlimit: one sliding-window decision for one key, atomically (see docs/redis.md).
--
-- KEYS[1]  the key's state: a packed string, little-endian,
--            [I2 w] [i8 last, only with bounded rates]
--            per bounded rate: [i8 lo][i8 sum][i8 newest][i8 counts x NB]
--            ring: up to L grant times, i7 (7-byte signed) microseconds each, +-1142 years;
--            the next grant goes to slot w. 7 bytes rather than 8 keep 100 grants in a
--            smaller allocation class (MEMORY USAGE 856 rather than 984 bytes).
--          The ring holds only real grants, so a key that saw 3 grants stores 3 entries.
-- ARGV     now (microseconds, '' = the server's TIME), cost, mode (0 enforce, 1 penalty,
--          2 peek), L, BoundedBuckets, expire (1 = set PEXPIRE), then per rate:
--          count, period (microseconds), granule (microseconds; 0 = exact rate).
-- Returns  {allowed (0/1), rate index, remaining, retry, reset, full reset, wait} (microseconds).
--
-- Every step mirrors core.Policy.Apply and core.Policy.report: keep them in step.
local key = KEYS[1]
local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[1])
end
local cost = tonumber(ARGV[2])
local mode = tonumber(ARGV[3])
local L = tonumber(ARGV[4])
local NB = tonumber(ARGV[5]) + 1
local expire = ARGV[6] == '1'
local nr = (#ARGV - 6) / 3
local count, period, gran = {}, {}, {}
local B = 0
for i = 1, nr do
  local a = 6 + (i - 1) * 3
  count[i] = tonumber(ARGV[a + 1])
  period[i] = tonumber(ARGV[a + 2])
  gran[i] = tonumber(ARGV[a + 3])
  if gran[i] > 0 then B = B + 1 end
end

local NEVER = -9007199254740992
local E, EF = 7, '<i7'
local hdr = 2
if B > 0 then hdr = 10 end
local blkFmt = '<' .. string.rep('i8', 3 + NB)
local blkLen = (3 + NB) * 8
local ringOff = hdr + B * blkLen

-- Read the state; anything malformed (a foreign value under our key) reads as empty.
local s = redis.call('GET', key)
local w, last, ring, fresh = 0, 0, '', true
if s and #s >= ringOff and (#s - ringOff) % E == 0 and (#s - ringOff) / E <= L then
  local n = (#s - ringOff) / E
  local w0 = struct.unpack('<I2', s)
  if (n < L and w0 == n) or (n == L and (w0 < L or L == 0)) then
    fresh = false
    w = w0
    if B > 0 then last = struct.unpack('<i8', s, 3) end
    ring = string.sub(s, ringOff + 1)
  end
end
local blocks = {}
for j = 1, B do
  local b = {lo = 0, sum = 0, newest = 0, c = {}}
  if fresh then
    for i = 1, NB do b.c[i] = 0 end
  else
    local v = {struct.unpack(blkFmt, s, hdr + (j - 1) * blkLen + 1)}
    b.lo, b.sum, b.newest = v[1], v[2], v[3]
    for i = 1, NB do b.c[i] = v[3 + i] end
  end
  blocks[j] = b
end

-- entry(k) is the k-th most recent grant (k >= 1), NEVER where the ring holds fewer.
local function entry(k)
  local i = w - k
  if i < 0 then i = i + L end
  if i * E >= #ring then return NEVER end
  return (struct.unpack(EF, ring, i * E + 1))
end

-- usedInLog counts the grants after cutoff among the last n, by binary search.
local function usedInLog(n, cutoff)
  if entry(n) > cutoff then return n end
  local lo, hi = 0, n - 1
  while lo < hi do
    local mid = math.floor((lo + hi + 1) / 2)
    if entry(mid) > cutoff then lo = mid else hi = mid - 1 end
  end
  return lo
end

-- Time never runs backwards for a key: clamp to the newest grant and the last decision.
if L > 0 then
  local newest = entry(1)
  if now < newest then now = newest end
end
if B > 0 and now < last then now = last end

-- Drop the buckets that no longer overlap (now-T, now].
local j = 0
for i = 1, nr do
  if gran[i] > 0 then
    j = j + 1
    local b, g = blocks[j], gran[i]
    local lo = math.floor((now - period[i]) / g)
    if lo > b.lo then
      if b.sum ~= 0 then
        if lo - b.lo >= NB then
          for k = 1, NB do b.c[k] = 0 end
          b.sum = 0
        else
          for k = b.lo, lo - 1 do
            local x = k % NB + 1
            b.sum = b.sum - b.c[x]
            b.c[x] = 0
          end
        end
      end
      b.lo = lo
    end
  end
end

-- Decide: every rate must have room.
local allowed = true
j = 0
for i = 1, nr do
  if gran[i] == 0 then
    if entry(count[i] - cost + 1) > now - period[i] then allowed = false end
  else
    j = j + 1
    if blocks[j].sum + cost > count[i] then allowed = false end
  end
end

-- Record.
local recorded = mode == 1 or (allowed and mode == 0)
if recorded then
  local m = math.min(cost, L)
  if m > 0 then
    local p = struct.pack(EF, now)
    local function put(from, cnt)
      ring = string.sub(ring, 1, from * E) .. string.rep(p, cnt) .. string.sub(ring, (from + cnt) * E + 1)
    end
    local first = math.min(m, L - w)
    put(w, first)
    if m > first then put(0, m - first) end
    w = (w + m) % L
  end
  j = 0
  for i = 1, nr do
    if gran[i] > 0 then
      j = j + 1
      local b = blocks[j]
      local k = math.max(math.floor(now / gran[i]), b.newest)
      local x = k % NB + 1
      b.c[x] = b.c[x] + cost
      b.sum = b.sum + cost
      b.newest = k
    end
  end
end

-- Report, as core.Policy.report.
-- wait is the true time until admission: the longest retry among the rates that refuse.
-- It differs from the reported RetryAfter where the engine's formula gives a bounded rate
-- with room a positive retry; the deny cache relies on wait.
local dRate, dRem, dRetry, dReset, full, wait = -1, 0, 0, 0, 0, 0
j = 0
for i = 1, nr do
  local T = period[i]
  local used, retry, reset = 0, 0, 0
  if gran[i] == 0 then
    used = usedInLog(count[i], now - T)
    if used > 0 then reset = entry(1) + T - now end
    if not allowed then
      retry = math.max(0, entry(count[i] - cost + 1) + T - now)
      if retry > wait then wait = retry end
    end
  else
    j = j + 1
    local b, g = blocks[j], gran[i]
    used = b.sum
    if used > 0 then reset = (b.newest + 1) * g + T - now end
    if not allowed then
      local need = used + cost - count[i]
      local freed = 0
      retry = math.max(0, (b.newest + 1) * g + T - now)
      for k = b.lo, b.newest do
        freed = freed + b.c[k % NB + 1]
        if freed >= need then
          retry = math.max(0, (k + 1) * g + T - now)
          break
        end
      end
      if need > 0 and retry > wait then wait = retry end
    end
  end
  local rem = math.max(0, count[i] - used)
  local tighter
  if dRate < 0 then
    tighter = true
  elseif not allowed then
    tighter = retry > dRetry or (retry == dRetry and rem < dRem)
  else
    tighter = rem < dRem or (rem == dRem and reset > dReset)
  end
  if tighter then
    dRate, dRem, dRetry, dReset = i - 1, rem, retry, reset
  end
  if reset > full then full = reset end
end

-- Write back. Expiry is cleanup only: it falls when the key holds nothing any window counts.
if recorded then
  local parts = {struct.pack('<I2', w)}
  if B > 0 then parts[2] = struct.pack('<i8', now) end
  for jj = 1, B do
    local b = blocks[jj]
    parts[#parts + 1] = struct.pack(blkFmt, b.lo, b.sum, b.newest, unpack(b.c))
  end
  parts[#parts + 1] = ring
  local v = table.concat(parts)
  if expire then
    redis.call('SET', key, v, 'PX', string.format('%d', math.max(1, math.ceil(full / 1000))))
  else
    redis.call('SET', key, v)
  end
elseif B > 0 and not fresh and now > last then
  redis.call('SETRANGE', key, 2, struct.pack('<i8', now))
end

local a = 0
if allowed then a = 1 end
return {a, dRate, dRem, dRetry, dReset, full, wait}
