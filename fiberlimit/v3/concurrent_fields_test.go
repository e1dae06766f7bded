package fiberlimit_test

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/gofiber/fiber/v3"

	"github.com/reqlimit/reqlimit/core"
	fiberlimit "github.com/reqlimit/reqlimit/fiberlimit/v3"
)

// Concurrent responses whose RateLimit values are too many to cache are formatted in boxes
// a pool lends: each response must carry its own request's value, whole, never another's.
func TestConcurrentFieldsAreEachResponsesOwn(t *testing.T) {
	const big, clients, each = 1_000_000_000, 4, 40
	app := fiber.New()
	store := core.WithStore(core.NewMemoryStore(nil))
	key := core.WithKey(core.KeyByHeader("X-Client"))
	app.Get("/a", fiberlimit.Limit(big, time.Hour, store, key), func(c fiber.Ctx) error { return c.SendString("a") })
	app.Get("/b", fiberlimit.Limit(big-7, 2*time.Hour, store, key), func(c fiber.Ctx) error { return c.SendString("b") })
	addr := serveLoopback(t, app)
	field := regexp.MustCompile(`^"([^"]+)";r=(\d+);t=(\d+)$`)

	var mu sync.Mutex
	seen := map[string][]int{} // route and client: remaining values
	var wg sync.WaitGroup
	errs := make(chan error, 2*clients*each)
	client := &http.Client{Timeout: 30 * time.Second}
	for _, route := range []string{"/a", "/b"} {
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					req, _ := http.NewRequest("GET", "http://"+addr+route, nil)
					req.Header.Set("X-Client", strconv.Itoa(c))
					resp, err := client.Do(req)
					if err != nil {
						errs <- err
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					v := resp.Header.Values("Ratelimit")
					if len(v) != 1 {
						errs <- fmt.Errorf("%s client %d: RateLimit %q, want one line", route, c, v)
						continue
					}
					m := field.FindStringSubmatch(v[0])
					wantName, wantPolicy := "1000000000/1h", `"1000000000/1h";q=1000000000;w=3600`
					if route == "/b" {
						wantName, wantPolicy = "999999993/2h", `"999999993/2h";q=999999993;w=7200`
					}
					if m == nil || m[1] != wantName {
						errs <- fmt.Errorf("%s client %d: RateLimit %q, want a member named %s", route, c, v[0], wantName)
						continue
					}
					if p := resp.Header.Values("Ratelimit-Policy"); len(p) != 1 || p[0] != wantPolicy {
						errs <- fmt.Errorf("%s client %d: RateLimit-Policy %q, want %q", route, c, p, wantPolicy)
					}
					r, _ := strconv.Atoi(m[2])
					mu.Lock()
					seen[route+strconv.Itoa(c)] = append(seen[route+strconv.Itoa(c)], r)
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for k, rs := range seen {
		sort.Ints(rs)
		top := big - 1
		if k[:2] == "/b" {
			top = big - 8
		}
		for i, r := range rs {
			if want := top - (len(rs) - 1) + i; r != want {
				t.Errorf("%s: remaining values %v, want each of %d..%d once", k, rs, top-len(rs)+1, top)
				break
			}
		}
	}
}
