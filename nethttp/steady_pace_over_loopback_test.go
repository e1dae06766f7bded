package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// TestSteadyPaceOverLoopbackIsStrictAndUsesEveryFreedSlot is the measurement that sinks
// most limiters: 100 per second, one caller every ~8 ms for ~10 s, over a real loopback
// connection. No 1-second interval may hold more than 100 admitted calls (counted by whole
// call spans, so reply delays cannot inflate the count), and every slot time frees must be
// used: each refusal must be justified by 100 admitted calls that could have fallen in the
// second before it. A slow machine sends fewer calls, but cannot make an unjustified
// refusal look justified.
func TestSteadyPaceOverLoopbackIsStrictAndUsesEveryFreedSlot(t *testing.T) {
	if testing.Short() {
		t.Skip("takes 10 seconds")
	}
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("GET /article", nethttp.Limit(100, time.Second, core.WithStore(core.NewMemoryStore(nil)))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	srv := httptest.NewServer(mux) // 127.0.0.1
	defer srv.Close()

	const pace, span = 8 * time.Millisecond, 10 * time.Second
	var admitted, refused []storetest.Call
	tick := time.NewTicker(pace)
	defer tick.Stop()
	for start := time.Now(); time.Since(start) < span; <-tick.C {
		s := time.Now()
		resp, err := srv.Client().Get(srv.URL + "/article")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		e := time.Now()
		switch resp.StatusCode {
		case 200:
			admitted = append(admitted, storetest.Call{Start: s, End: e})
		case 429:
			refused = append(refused, storetest.Call{Start: s, End: e})
		default:
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	worst := storetest.MaxInWindow(admitted, time.Second)
	t.Logf("admitted %d, refused %d, most in any 1s interval %d", len(admitted), len(refused), worst)
	if worst > 100 {
		t.Fatalf("%d admitted within one second, limit 100", worst)
	}
	for _, r := range refused {
		// Decided at some d in [r.Start, r.End], the refusal needs 100 grants in
		// (d-1s, d]: only calls that started by r.End and ended after r.Start-1s can be.
		n := 0
		for _, a := range admitted {
			if !a.Start.After(r.End) && a.End.After(r.Start.Add(-time.Second)) {
				n++
			}
		}
		if n < 100 {
			t.Fatalf("call %v refused with at most %d grants in the second before it: a slot freed by time went unused", r, n)
		}
	}
	if len(admitted) < 100 {
		t.Fatalf("admitted %d in %v, want at least a full second's quota", len(admitted), span)
	}
}
