package nethttp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// planOf is the tier a request asks for in these tests.
func planOf(r core.Request) string { return r.Header("X-Plan") }

// statusHandler answers with the status its query's s names, 200 without one.
var statusHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	s, err := strconv.Atoi(r.URL.Query().Get("s"))
	if err != nil {
		s = http.StatusOK
	}
	w.WriteHeader(s)
})

// passed counts which of n requests to h, on GET /x?s=status with plan, got through.
func passed(h http.Handler, plan string, status, n int) int {
	got := 0
	for range n {
		r := httptest.NewRequest("GET", "/x?s="+strconv.Itoa(status), nil)
		r.RemoteAddr = "192.0.2.1:1"
		if plan != "" {
			r.Header.Set("X-Plan", plan)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code == status {
			got++
		}
	}
	return got
}

var onePolicyPrefix atomic.Int64

// On Redis, limits registered at two places with one policy text count apart on one
// route, as in memory: there the ident is in the scope, joined per request. A tier of the
// limit's own text stays apart from the limit's bucket, and a quota resets both.
func TestLimitsOfOnePolicyCountApartOnRedis(t *testing.T) {
	redistest.Require(t)
	srv, err := redistest.StartServer(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()
	store := core.WithStore(redisstore.New(rdb, redisstore.WithTimeout(redistest.Timeout),
		redisstore.WithPrefix(fmt.Sprintf("onepolicy%d:", onePolicyPrefix.Add(1)))))

	mux := http.NewServeMux()
	mux.Handle("GET /x", nethttp.Limit(2, time.Minute, store)(nethttp.Limit(2, time.Minute, store)(statusHandler)))
	if got := passed(mux, "", 200, 3); got != 2 {
		t.Fatalf("%d of 3 requests passed two 2/1m limits, want 2: they share a bucket", got)
	}

	q := new(core.Quota)
	mux = http.NewServeMux()
	mux.Handle("GET /x", nethttp.Limit(2, time.Minute, store, core.WithScope("onepolicy"), core.WithQuota(q),
		core.WithTiers(planOf, map[string]string{"gold": "2/1m"}))(statusHandler))
	if got := passed(mux, "gold", 200, 3); got != 2 {
		t.Fatalf("tier gold: %d of 3 passed, want 2", got)
	}
	if got := passed(mux, "", 200, 3); got != 2 {
		t.Fatalf("the limit's own 2/1m after gold's 2: %d of 3 passed, want 2: they share a bucket", got)
	}
	if err := q.Reset(context.Background(), "192.0.2.1"); err != nil {
		t.Fatal(err)
	}
	if got := passed(mux, "gold", 200, 1) + passed(mux, "", 200, 1); got != 2 {
		t.Fatalf("after Quota.Reset %d of gold's and the own policy's first requests passed, want both", got)
	}
}

// While the Redis store fails, FailLocal decides in a memory store with the ident in the
// scope and the policy's salt both: a tier of the limit's own policy text keeps a bucket
// apart from the limit's in the stand-in that a scope name's limits share, and a grant
// given back (WithCountWhen) leaves the entry Decide recorded in.
func TestFailLocalKeepsATierOfTheOwnPolicyApart(t *testing.T) {
	// A server that cannot be reached: every decision fails at once. A dialer that fails,
	// not a stopped server's port, which another test's server may take meanwhile.
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1, DialerRetryTimeout: time.Millisecond,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return nil, errors.New("server down") }})
	defer rdb.Close()
	store := redisstore.New(rdb, redisstore.WithTimeout(redistest.Timeout), redisstore.WithPrefix("faillocal-onepolicy:"))

	for _, scope := range []string{"", fmt.Sprintf("faillocal-onepolicy-%d", onePolicyPrefix.Add(1))} {
		var errored atomic.Int64
		opts := []core.Option{core.WithStore(store), core.WithFailMode(core.FailLocal), core.WithCountWhen(core.Failed),
			core.WithTiers(planOf, map[string]string{"gold": "2/1m"}), core.WithErrorHook(func(context.Context, error) {}),
			core.WithObserver(func(e core.Event) {
				if e.Outcome == core.Errored {
					errored.Add(1)
				}
			})}
		if scope != "" {
			opts = append(opts, core.WithScope(scope))
		}
		mux := http.NewServeMux()
		mux.Handle("GET /x", nethttp.Limit(2, time.Minute, opts...)(statusHandler))
		if got := passed(mux, "gold", 200, 3); got != 3 {
			t.Fatalf("scope %q: %d of 3 given-back gold requests passed, want 3: Release missed Decide's entry", scope, got)
		}
		if got := passed(mux, "gold", 500, 3); got != 2 {
			t.Fatalf("scope %q: %d of 3 counted gold requests passed 2/1m, want 2", scope, got)
		}
		if got := passed(mux, "", 500, 3); got != 2 {
			t.Fatalf("scope %q: the limit's own 2/1m after gold's 2: %d of 3 passed, want 2: they share a bucket", scope, got)
		}
		if errored.Load() == 0 {
			t.Fatalf("scope %q: no decision failed over to FailLocal", scope)
		}
	}
}
