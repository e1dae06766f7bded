package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// instanceEnv marks a re-executed test binary acting as one instance of
// TestInstancesRegisteringInAnyOrderShareOneQuota: "redis address,prefix,order".
const instanceEnv = "REQLIMIT_REDISSTORE_INSTANCE"

// Two instances of one build register the limits of /a and /b, the same policy, in
// opposite orders (as a configuration map iterated in Go's random order does, or routes
// registered by goroutines), each in a process of its own, on one Redis. A client gets its
// quota once across both: each limit's buckets are named alike in every instance, not by
// which limit registered first.
func TestInstancesRegisteringInAnyOrderShareOneQuota(t *testing.T) {
	needRedis(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prefix := freshPrefix(t)
	admitted := map[string]int{}
	for _, order := range []string{"ab", "ba"} {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%s", instanceEnv, standalone.Addr(), prefix, order))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("instance registering in order %q: %v\n%s", order, err, stderr.Bytes())
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var route string
			var n int
			if _, err := fmt.Sscanf(line, "%s %d", &route, &n); err != nil {
				t.Fatalf("instance registering in order %q: bad line %q", order, line)
			}
			admitted[route] += n
			t.Logf("instance registering in order %q: %d of %d requests admitted on %s", order, n, instanceRequests, route)
		}
	}
	for _, route := range []string{"/a", "/b"} {
		if admitted[route] != instanceQuota {
			t.Errorf("%s: %d requests admitted across the two instances, want %d: the instances keyed the limit's buckets apart", route, admitted[route], instanceQuota)
		}
	}
}

const (
	// The quota, in an hour rather than a minute: the test counts on no grant leaving
	// its window between the two instances' requests, however loaded the machine.
	instanceQuota    = 3
	instanceRequests = 2 * instanceQuota
)

// instanceMain is one instance of TestInstancesRegisteringInAnyOrderShareOneQuota: it
// registers the limits of /a and /b in the order given, sends instanceRequests requests
// of one client to each, and prints how many of them each admitted.
func instanceMain() int {
	parts := strings.Split(os.Getenv(instanceEnv), ",")
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "instance: bad", instanceEnv)
		return 2
	}
	c := redis.NewClient(&redis.Options{Addr: parts[0]})
	defer c.Close()
	store := redisstore.New(c, roomy, redisstore.WithPrefix(parts[1]))
	limits := map[string]adapter.Limiter{}
	var errs []error
	// Each route's limit is registered in a function of its own, as routes of an
	// application are; the one loop calling them keeps their call stacks equal in both
	// orders, as a loop over a configuration map does.
	register := []func(core.Store) (string, adapter.Limiter, error){registerA, registerB}
	if parts[2] == "ba" {
		slices.Reverse(register)
	}
	for _, r := range register {
		route, l, err := r(store)
		limits[route] = l
		errs = append(errs, err)
	}
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, "instance:", err)
			return 1
		}
	}
	for _, route := range []string{"/a", "/b"} {
		n := 0
		for range instanceRequests {
			v := limits[route].Check(context.Background(), adapter.Input{Route: route, Peer: "192.0.2.7:1234"}, nil)
			if v.Err != nil {
				fmt.Fprintln(os.Stderr, "instance:", v.Err)
				return 1
			}
			if v.Allowed {
				n++
			}
		}
		fmt.Println(route, n)
	}
	return 0
}

// instanceOpts is how both routes' limits decide: on the shared store, refusing when it
// fails, so that an outage cannot pass for a quota given twice.
func instanceOpts(s core.Store) []core.Option {
	return []core.Option{core.WithStore(s), core.WithFailMode(core.FailClosed)}
}

func registerA(s core.Store) (string, adapter.Limiter, error) {
	l, err := adapter.New(instanceQuota, time.Hour, instanceOpts(s)...)
	return "/a", l, err
}

func registerB(s core.Store) (string, adapter.Limiter, error) {
	l, err := adapter.New(instanceQuota, time.Hour, instanceOpts(s)...)
	return "/b", l, err
}
