-- Where a key's fields are, by its kind (the script that decides its policy, see
-- release.lua): the ring's header size HDR and its entries' size ES (i7 microseconds, or for
-- kind 6 a uint16 offset from the unit at byte 12); each bounded rate's [lo][sum][newest]
-- from byte heads and its first count at byte counts (bytes, from 1; in kind 5, a block of
-- BLK bytes a rate); the time of the key's latest decision, at byte LAST (kinds 3, 4, 5; 0:
-- none).
local NB = 101
local HDR, ES, BLK, heads, counts, LAST = 0, 7, (3 + NB) * 8, 0, 0, 0
if kind == 1 then
  HDR = 11
elseif kind == 6 then
  HDR, ES = 18, 2
elseif kind == 2 then
  HDR = 9 + 2 * nr
elseif kind == 3 then
  heads, counts, LAST = 9, 40, 1
elseif kind == 4 then
  heads, counts, LAST = 16, 16 + 24 * nb, 1
elseif kind == 5 then
  heads, counts, HDR, LAST = 11, 35, 10 + nb * BLK, 3
end
