package redisstore_test

import (
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
)

// A foreign value under a key (one no script wrote) holds no grant: every decision reads
// it as an empty key and release.lua leaves it alone. reset.lua read its bytes as the key's
// clock all the same, and fenced the key at that time: where they read as a time in the
// future, every grant made after the reset was taken for one the reset forgot, and no
// give-back (WithCountWhen) reached it, for two periods, or for good under WithClock.
func TestResetOfAForeignValueLeavesGiveBacksWorking(t *testing.T) {
	far := int64(1) << 54 // microseconds, some centuries ahead
	for _, c := range []struct {
		text    string
		foreign func() []byte
	}{
		// exact.lua's layout: [I2 w] [i7 E] [I2 b], then 2 entries, whose w (5) no ring of
		// 3 places has: exact.lua reads it as empty. reset.lua read entry (w-1) mod 2.
		{"3/1h", func() []byte {
			v := make([]byte, 11+2*7)
			binary.LittleEndian.PutUint16(v, 5)
			copy(v[11:], binary.LittleEndian.AppendUint64(nil, uint64(far))[:7])
			return v
		}},
		// bounded.lua's layout, too short: fresh to bounded.lua. reset.lua read its
		// latest decision's time, at bytes 2-9.
		{"2/1s,300/1h", func() []byte {
			v := make([]byte, 40)
			binary.LittleEndian.PutUint64(v[2:], uint64(far))
			return v
		}},
	} {
		t.Run(c.text, func(t *testing.T) {
			needRedis(t)
			ctx := context.Background()
			clock := storetest.NewManualClock(time.Unix(1_700_000_000, 0))
			rdb := newClient(t, standalone)
			s := redisstore.New(rdb, roomy, redisstore.WithPrefix(freshPrefix(t)),
				redisstore.WithClock(clock.Now), redisstore.WithDenyCache(false))
			p := mustParse(c.text)
			q := core.Query{Policy: p, Key: "alice"}
			if err := rdb.Set(ctx, s.Key(p, "", "alice"), c.foreign(), 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := s.Reset(ctx, q); err != nil {
				t.Fatal(err)
			}
			clock.Advance(time.Millisecond)
			d, err := s.Decide(ctx, q)
			if err != nil || !d.Allowed {
				t.Fatalf("first decision after the reset: %+v %v", d, err)
			}
			if err := s.Release(ctx, q, d.Grant); err != nil {
				t.Fatal(err)
			}
			q.Mode = core.Peek
			if d, err := s.Decide(ctx, q); err != nil || d.Remaining != p.Rates()[0].Count {
				t.Fatalf("after giving back the only grant: %+v %v, want %d left: the reset fenced the key at a time its foreign value held", d, err, p.Rates()[0].Count)
			}
		})
	}
}
