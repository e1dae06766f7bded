-- Every step costs: Redis's Lua interprets each global lookup, table index and call, so
-- library functions are held in locals, and the scripts create no tables and no closures
-- (each is an allocation and later work for Lua's collector).
local unpack, pack, call = struct.unpack, struct.pack, redis.call
-- Replies are eight little-endian int64s packed in one string (replyLen in store.go):
-- converting a table of eight numbers would cost the server more than a short decision.
-- The last is now, the time a recorded grant was recorded at (core.Decision.Grant).
--#define REPLY(allowed, rate, rem, retry, reset, full, wait) pack('<i8i8i8i8i8i8i8i8', $allowed, $rate, $rem, $retry, $reset, $full, $wait, now)
