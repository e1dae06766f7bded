-- reqlimit: one sliding-window decision for one key, atomically (see docs/redis.md).
--
-- KEYS[1]  the key's state: a packed string, little-endian,
--            [I2 w] [i8 last, only with bounded rates]
--            per bounded rate: [i8 lo][i8 sum][i8 newest][i8 counts x NB]
--            ring: up to L grant times, i7 (7-byte signed) microseconds each, +-1142 years;
--            the next grant goes to slot w. 7 bytes rather than 8 keep 100 grants in a
--            smaller allocation class (MEMORY USAGE 856 rather than 984 bytes).
--          The ring holds only real grants, so a key that saw 3 grants stores 3 entries.
-- ARGV[1] packed i8 values, ARGV[2] their struct format: use TIME (1) or the given now,
--          now (microseconds), cost, mode (0 enforce, 1 penalty, 2 peek), expire (1 = set
--          PEXPIRE), L, BoundedBuckets, the number of rates, then per rate: count, period
--          (microseconds), granule (microseconds; 0 = exact rate).
-- Returns  allowed (0/1), rate index, remaining, retry, reset, full reset, wait (microseconds),
--          as seven packed little-endian i8 in one string (cheaper to reply than a table).
--
-- Every step mirrors core.Policy.Apply and core.Policy.report: keep them in step.
-- Library functions are held in locals: Redis's Lua interprets every global lookup.
local unpack, pack, call = struct.unpack, struct.pack, redis.call
local floor, max, min, ceil = math.floor, math.max, math.min, math.ceil
local rep, sub, concat = string.rep, string.sub, table.concat
local key = KEYS[1]
-- The arguments come packed (struct.unpack is far cheaper than tonumber on strings).
local v = {unpack(ARGV[2], ARGV[1])}
local now
if v[1] == 1 then
  local t = call('TIME')
  now = t[1] * 1000000 + t[2]
else
  now = v[2]
end
local cost, mode, expire, L, NB, nr = v[3], v[4], v[5] == 1, v[6], v[7] + 1, v[8]
local count, period, gran = {}, {}, {}
local B = 0
for i = 1, nr do
  local a = 8 + (i - 1) * 3
  count[i], period[i], gran[i] = v[a + 1], v[a + 2], v[a + 3]
  if gran[i] > 0 then B = B + 1 end
end

local NEVER = -9007199254740992
local E, EF = 7, '<i7'
local hdr = 2
if B > 0 then hdr = 10 end
local blkLen = (3 + NB) * 8
local ringOff = hdr + B * blkLen

-- Read the state; anything malformed (a foreign value under our key) reads as empty.
-- Only the headers are unpacked here: entries and bucket counts are read where needed,
-- so a decision costs the same whatever the ring's length.
local s = call('GET', key)
local w, last, n, fresh = 0, 0, 0, true
if s and #s >= ringOff and (#s - ringOff) % E == 0 and (#s - ringOff) / E <= L then
  local n0 = (#s - ringOff) / E
  local w0 = unpack('<I2', s)
  if (n0 < L and w0 == n0) or (n0 == L and (w0 < L or L == 0)) then
    fresh, w, n = false, w0, n0
    if B > 0 then last = unpack('<i8', s, 3) end
  end
end

-- Entries are read from s in place. A grant recorded in a full ring is kept in wfrom/wto
-- (the slots it overwrote) and patched in with SETRANGE; while the ring grows it is
-- rebuilt in ring and the whole value is SET. (A SET of a large value costs several times
-- a SETRANGE, and SETRANGE beyond the end would make Redis over-allocate.)
local ring = nil
local wfrom, wto = {}, {}
local function entry(k) -- the k-th most recent grant (k >= 1), NEVER where the ring holds fewer
  local i = w - k
  if i < 0 then i = i + L end
  if i >= n then return NEVER end
  if ring then return (unpack(EF, ring, i * E + 1)) end
  for x = 1, #wfrom do
    if i >= wfrom[x] and i < wto[x] then return now end
  end
  return (unpack(EF, s, ringOff + i * E + 1))
end

-- usedInLog counts the grants after cutoff among the last c, by binary search over the
-- n entries the ring holds (a young key's search is short).
local function usedInLog(c, cutoff)
  if c <= n and entry(c) > cutoff then return c end
  local lo, hi = 0, min(c - 1, n)
  while lo < hi do
    local mid = floor((lo + hi + 1) / 2)
    if entry(mid) > cutoff then lo = mid else hi = mid - 1 end
  end
  return lo
end

-- Bounded rates: headers in tables, counts read in place and changed ones kept in cnt
-- (by byte position) until the write; cleared[j] means block j's counts are all zero.
local blo, bsum, bnew, cleared, cnt = {}, {}, {}, {}, {}
for j = 1, B do
  if fresh then
    blo[j], bsum[j], bnew[j], cleared[j] = 0, 0, 0, true
  else
    blo[j], bsum[j], bnew[j] = unpack('<i8i8i8', s, hdr + (j - 1) * blkLen + 1)
  end
end
local function cpos(j, k) return hdr + (j - 1) * blkLen + 24 + (k % NB) * 8 + 1 end
local function getc(j, k)
  local p = cpos(j, k)
  local v = cnt[p]
  if v then return v end
  if cleared[j] then return 0 end
  return (unpack('<i8', s, p))
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
    local lo = floor((now - period[i]) / gran[i])
    if lo > blo[j] then
      if bsum[j] ~= 0 then
        if lo - blo[j] >= NB then
          cleared[j] = true
          local b0 = hdr + (j - 1) * blkLen + 24
          for pos in pairs(cnt) do
            if pos > b0 and pos <= b0 + NB * 8 then cnt[pos] = nil end
          end
          bsum[j] = 0
        else
          for k = blo[j], lo - 1 do
            local c = getc(j, k)
            if c ~= 0 then
              bsum[j] = bsum[j] - c
              cnt[cpos(j, k)] = 0
            end
          end
        end
      end
      blo[j] = lo
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
    if bsum[j] + cost > count[i] then allowed = false end
  end
end

-- Record.
local recorded = mode == 1 or (allowed and mode == 0)
if recorded then
  local m = min(cost, L)
  if m > 0 then
    local first = min(m, L - w)
    if n < L then
      ring = ''
      if not fresh then ring = sub(s, ringOff + 1) end
      local p = pack(EF, now)
      local function put(from, c)
        ring = sub(ring, 1, from * E) .. rep(p, c) .. sub(ring, (from + c) * E + 1)
      end
      put(w, first)
      if m > first then put(0, m - first) end
      n = #ring / E
    else
      wfrom[1], wto[1] = w, w + first
      if m > first then wfrom[2], wto[2] = 0, m - first end
    end
    w = (w + m) % L
  end
  j = 0
  for i = 1, nr do
    if gran[i] > 0 then
      j = j + 1
      local k = max(floor(now / gran[i]), bnew[j])
      -- A bucket holds at most the rate's count (as core's record).
      local c = getc(j, k)
      local add = min(cost, count[i] - c)
      if add > 0 then
        cnt[cpos(j, k)] = c + add
        bsum[j] = bsum[j] + add
      end
      bnew[j] = k
    end
  end
end

-- Report, as core.Policy.report.
-- wait is the true time until admission: the longest retry among the rates that refuse,
-- which is also the tightest rate's retry; the deny cache relies on it.
local dRate, dRem, dRetry, dReset, full, wait = -1, 0, 0, 0, 0, 0
j = 0
for i = 1, nr do
  local T = period[i]
  local used, retry, reset = 0, 0, 0
  if gran[i] == 0 then
    used = usedInLog(count[i], now - T)
    if used > 0 then reset = entry(1) + T - now end
    if not allowed then
      retry = max(0, entry(count[i] - cost + 1) + T - now)
      if retry > wait then wait = retry end
    end
  else
    j = j + 1
    local g = gran[i]
    used = bsum[j]
    if used > 0 then reset = (bnew[j] + 1) * g + T - now end
    local need = used + cost - count[i]
    if not allowed and need > 0 then -- a rate with room reports no wait, as in core
      local freed = 0
      retry = max(0, (bnew[j] + 1) * g + T - now)
      for k = blo[j], bnew[j] do
        freed = freed + getc(j, k)
        if freed >= need then
          retry = max(0, (k + 1) * g + T - now)
          break
        end
      end
      if retry > wait then wait = retry end
    end
  end
  local rem = max(0, count[i] - used)
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

-- Write back: the whole value when the key is new or its ring grew, otherwise only the
-- bytes that changed. Expiry is cleanup only: it falls when the key holds nothing any
-- window counts.
if recorded then
  local ttl = max(1, ceil(full / 1000))
  -- countsOf builds block jj's counts as stored, with the changes in cnt applied.
  local function countsOf(jj)
    local base = hdr + (jj - 1) * blkLen + 24
    local region
    if cleared[jj] then
      region = rep('\0\0\0\0\0\0\0\0', NB)
    else
      region = sub(s, base + 1, base + NB * 8)
    end
    for pos, c in pairs(cnt) do
      local off = pos - 1 - base
      if off >= 0 and off < NB * 8 then
        region = sub(region, 1, off) .. pack('<i8', c) .. sub(region, off + 9)
      end
    end
    return region
  end
  if fresh or ring then
    local parts = {pack('<I2', w)}
    if B > 0 then parts[2] = pack('<i8', now) end
    for jj = 1, B do
      parts[#parts + 1] = pack('<i8i8i8', blo[jj], bsum[jj], bnew[jj])
      parts[#parts + 1] = countsOf(jj)
    end
    parts[#parts + 1] = ring or ''
    local val = concat(parts)
    if expire then
      call('SET', key, val, 'PX', ttl)
    else
      call('SET', key, val)
    end
  else
    -- The header, with the first block's header, which follows at once.
    local h = pack('<I2', w)
    if B > 0 then h = h .. pack('<i8i8i8i8', now, blo[1], bsum[1], bnew[1]) end
    call('SETRANGE', key, '0', h)
    for jj = 1, B do
      local base = hdr + (jj - 1) * blkLen
      if jj > 1 then
        call('SETRANGE', key, base, pack('<i8i8i8', blo[jj], bsum[jj], bnew[jj]))
      end
      if cleared[jj] then call('SETRANGE', key, base + 24, countsOf(jj)) end
    end
    for pos, c in pairs(cnt) do
      if not cleared[floor((pos - 1 - hdr) / blkLen) + 1] then
        call('SETRANGE', key, pos - 1, pack('<i8', c))
      end
    end
    local p = pack(EF, now)
    for x = 1, #wfrom do
      call('SETRANGE', key, ringOff + wfrom[x] * E, rep(p, wto[x] - wfrom[x]))
    end
    if expire then call('PEXPIRE', key, ttl) end
  end
elseif B > 0 and not fresh and now > last then
  call('SETRANGE', key, '2', pack('<i8', now))
end

local a = 0
if allowed then a = 1 end
return pack('<i8i8i8i8i8i8i8', a, dRate, dRem, dRetry, dReset, full, wait)
