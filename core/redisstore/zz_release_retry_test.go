package redisstore_test

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
)

// dropProxy forwards loopback connections to a Redis server; once armed, it swallows the
// next reply the server sends and closes that connection, as a connection reset (a proxy or
// load balancer dropping it, CLIENT KILL, a network blip) after the server ran the command.
type dropProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	wg     sync.WaitGroup
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{ln: ln, target: target}
	var conns sync.Map
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns.Store(c, s)
			p.wg.Go(func() { io.Copy(s, c); s.Close() })
			p.wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := s.Read(buf)
					if err != nil {
						c.Close()
						return
					}
					if p.armed.CompareAndSwap(true, false) {
						c.Close()
						s.Close()
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						s.Close()
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(c, s any) bool { c.(net.Conn).Close(); s.(net.Conn).Close(); return true })
		p.wg.Wait()
	})
	return p
}

// release.lua is not idempotent: it gives back cost units from the bucket of the grant's time
// (bounded), or the entries at the grant's unit (compact), whichever grant they belong to. go-redis
// sends a command again when its connection ends before the reply (io.EOF is retryable,
// MaxRetries 3 by default), so a release the server ran, whose reply was lost, runs twice:
// two grants given back for one, and one request more than the count admitted in a window.
// (A decision that runs twice only records a grant twice, which is stricter; a release run
// twice is looser.)
func TestZZReleaseRunsTwiceOnConnectionReset(t *testing.T) {
	needRedis(t)
	for _, c := range []struct {
		text    string
		compact bool
	}{
		{"300/1h", false}, // bounded: a bucket is 36 s
		{"5/15m", true},   // compact: a unit is 50 ms
	} {
		name := c.text
		if c.compact {
			name += "/compact"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			px := startDropProxy(t, standalone.Addr())
			client := redis.NewClient(&redis.Options{Addr: px.ln.Addr().String(), ContextTimeoutEnabled: true})
			t.Cleanup(func() { client.Close() })
			s := redisstore.New(client, roomy, redisstore.WithPrefix(freshPrefix(t)), redisstore.WithCompact(c.compact), redisstore.WithDenyCache(false))
			p := mustParse(c.text)
			n := p.Rates()[0].Count
			q := core.Query{Policy: p, Scope: "login", Key: "alice"}
			var grants []int64
			for len(grants) < n {
				d, err := s.Decide(ctx, q)
				if err != nil || !d.Allowed {
					t.Fatalf("grant %d: %+v %v", len(grants)+1, d, err)
				}
				grants = append(grants, d.Grant)
			}
			// release.lua is cached on the server first (a release of a grant another key
			// never held), so that the reply dropped below is the release's own.
			if err := s.Release(ctx, core.Query{Policy: p, Scope: "login", Key: "warm"}, 1); err != nil {
				t.Fatal(err)
			}
			// One request's response does not count: its grant is given back, once. The
			// server runs the release; the connection drops before its reply arrives.
			px.armed.Store(true)
			if err := s.Release(ctx, q, grants[n-1]); err != nil {
				t.Logf("release: %v", err)
			}
			if px.armed.Load() {
				t.Fatal("the proxy dropped nothing")
			}
			admitted := 0
			for range 3 {
				d, err := s.Decide(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if d.Allowed {
					admitted++
				}
			}
			if admitted != 1 {
				t.Fatalf("%v: %d grants, one given back, then %d more admitted in the same window, want 1: the release ran twice (go-redis sent it again after the reset connection), giving back another request's grant: %d requests admitted in one window", p, n, admitted, n-1+admitted)
			}
		})
	}
}
