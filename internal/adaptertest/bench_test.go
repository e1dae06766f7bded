package adaptertest

import (
	"context"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// BenchmarkCoreCheck is the floor under every adapter's limited route: core's own work for
// one admitted request (Check, which sets the fields too), with the same limit and client as Bench.
// HeaderMap is what the net/http, Gin and Echo adapters pass.
func BenchmarkCoreCheck(b *testing.B) {
	for _, c := range []struct {
		name  string
		style core.HeaderStyle
	}{{"headers-off", core.HeadersOff}, {"standard", core.HeadersStandard}} {
		b.Run(c.name, func(b *testing.B) {
			l := adapter.Must(100, time.Microsecond, core.WithShortPeriods(), core.WithStore(core.NewMemoryStore(nil)), core.WithHeaders(c.style))
			in := adapter.Input{Route: "/user/:id", Peer: DefaultRemote}
			h := adapter.HeaderMap{}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				clear(h) // a response's fields start empty: limits add to them
				v := l.Check(ctx, in, h)
				if !v.Allowed {
					b.Fatal("refused")
				}
			}
		})
	}
}
