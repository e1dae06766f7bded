package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/core/storetest"
)

const (
	crossN       = 20
	crossPer     = 200 * time.Millisecond
	crossRun     = 1500 * time.Millisecond
	crossWorkers = 4
	crossProcs   = 3
)

// TestCrossProcessStrict runs one key from several OS processes with several goroutines
// each, and checks from the callers' side that no window ever held more than N grants.
func TestCrossProcessStrict(t *testing.T) {
	needRedis(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	prefix := freshPrefix(t)
	// All children start together, so they contend for the key from the first moment.
	startAt := time.Now().Add(500 * time.Millisecond)
	var mu sync.Mutex
	var calls []storetest.Call
	perProc := make([]int, crossProcs)
	var wg sync.WaitGroup
	for i := range crossProcs {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+strings.Join([]string{standalone.Addr(), prefix, strconv.FormatInt(startAt.UnixNano(), 10)}, ","))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var a, b int64
				if _, err := fmt.Sscanf(sc.Text(), "%d %d", &a, &b); err != nil {
					t.Errorf("child %d: bad line %q", i, sc.Text())
					continue
				}
				mu.Lock()
				calls = append(calls, storetest.Call{Start: time.Unix(0, a), End: time.Unix(0, b)})
				perProc[i]++
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("child %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	worst := storetest.MaxInWindow(calls, crossPer)
	t.Logf("%d grants from %d processes (%v), at most %d in one %v interval", len(calls), crossProcs, perProc, worst, crossPer)
	if worst > crossN {
		t.Fatalf("%d grants inside one %v interval across processes, limit %d", worst, crossPer, crossN)
	}
	if want := int(crossRun/crossPer-1) * crossN; len(calls) < want {
		t.Fatalf("only %d grants in %v, want at least %d", len(calls), crossRun, want)
	}
	for i, n := range perProc {
		if n == 0 {
			t.Fatalf("process %d got no grant: it did not take part", i)
		}
	}
}

// childMain is one process of TestCrossProcessStrict: it prints "start end" (unix
// nanoseconds) for each grant it receives.
func childMain() int {
	parts := strings.Split(os.Getenv(childEnv), ",")
	if len(parts) != 3 {
		fmt.Fprintln(os.Stderr, "child: bad", childEnv)
		return 2
	}
	at, _ := strconv.ParseInt(parts[2], 10, 64)
	c := redis.NewClient(&redis.Options{Addr: parts[0]})
	defer c.Close()
	s := redisstore.New(c, roomy, redisstore.WithPrefix(parts[1]))
	q := core.Query{Policy: core.MustPolicy(core.Per(crossN, crossPer)), Key: "shared"}
	time.Sleep(time.Until(time.Unix(0, at)))
	deadline := time.Now().Add(crossRun)
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	failed := false
	for range crossWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				start := time.Now()
				d, err := s.Decide(context.Background(), q)
				end := time.Now()
				if err != nil {
					fmt.Fprintln(os.Stderr, "child:", err)
					mu.Lock()
					failed = true
					mu.Unlock()
					return
				}
				if d.Allowed {
					mu.Lock()
					fmt.Fprintf(w, "%d %d\n", start.UnixNano(), end.UnixNano())
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	w.Flush()
	if failed {
		return 1
	}
	return 0
}
