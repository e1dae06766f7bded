package nethttp_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
	"github.com/reqlimit/reqlimit/nethttp"
)

// A 1/1h limit on a side-effect route ("send an SMS") kept in Redis, default fail mode
// (FailOpen). A client that sends its request and hangs up at once cancels the request's
// context while the decision is on its way to Redis: that is not a store outage, and the
// request must not run uncounted, or hanging up would skip the limit.
func TestClientHangUpDoesNotSkipRedisLimit(t *testing.T) {
	redistest.Require(t)
	srv, err := redistest.StartServer(t.TempDir(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rdb.Close()

	var ran atomic.Int64
	var mu sync.Mutex
	var hookErrs []error
	h := nethttp.Limit(1, time.Hour, core.WithStore(redisstore.New(rdb, redisstore.WithTimeout(redistest.Timeout), redisstore.WithPrefix("hangup:"))),
		core.WithErrorHook(func(_ context.Context, err error) { mu.Lock(); hookErrs = append(hookErrs, err); mu.Unlock() }))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { ran.Add(1) }))
	ts := httptest.NewServer(h)
	defer ts.Close()
	addr := ts.Listener.Addr().String()

	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("GET /sms HTTP/1.1\r\nHost: x\r\n\r\n"))
		c.(*net.TCPConn).CloseWrite() // hang up: the server sees EOF and cancels the context
		time.Sleep(5 * time.Millisecond)
		c.Close()
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if n := ran.Load(); n > 1 {
		first := error(nil)
		if len(hookErrs) > 0 {
			first = hookErrs[0]
		}
		t.Fatalf("1/1h limit on Redis: the handler ran %d times; %d hang-ups were let through as store failures, the first: %v",
			n, len(hookErrs), first)
	}
}
