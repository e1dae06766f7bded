package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
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
	// crossSample bounds the refusals each worker reports (a uniform sample of them).
	crossSample = 1024
)

// TestCrossProcessStrict runs one key from several OS processes with several goroutines
// each, and checks from the callers' side that no window ever held more than N grants,
// and that no refusal came while the key had room.
func TestCrossProcessStrict(t *testing.T) {
	needRedis(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for attempt := 1; ; attempt++ {
		why := crossProcessRun(t, exe)
		if why == "" {
			return
		}
		if attempt == 3 {
			t.Fatalf("in each of %d runs the machine was too slow for the check: %s", attempt, why)
		}
		t.Logf("%s; again", why)
	}
}

// crossProcessRun makes one run of TestCrossProcessStrict, failing t on a violation. It returns why the run showed too little to check, or "".
func crossProcessRun(t *testing.T, exe string) string {
	prefix := freshPrefix(t)
	var mu sync.Mutex
	var grants, refusals []storetest.Call
	perProc := make([]int, crossProcs)
	var wg sync.WaitGroup
	var gos []io.WriteCloser
	ready := make(chan bool, crossProcs)
	for i := range crossProcs {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s", childEnv, standalone.Addr(), prefix))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		gos = append(gos, in)
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := bufio.NewScanner(out)
			ready <- sc.Scan() && sc.Text() == "ready"
			for sc.Scan() {
				var kind string
				var a, b int64
				if _, err := fmt.Sscanf(sc.Text(), "%s %d %d", &kind, &a, &b); err != nil || (kind != "G" && kind != "R") {
					t.Errorf("child %d: bad line %q", i, sc.Text())
					continue
				}
				c := storetest.Call{Start: time.Unix(0, a), End: time.Unix(0, b)}
				mu.Lock()
				if kind == "G" {
					grants = append(grants, c)
					perProc[i]++
				} else {
					refusals = append(refusals, c)
				}
				mu.Unlock()
			}
			if err := cmd.Wait(); err != nil {
				t.Errorf("child %d: %v", i, err)
			}
		}()
	}
	// All children start together, however long each took to start, so they contend for
	// the key from the first moment.
	for range crossProcs {
		if !<-ready {
			t.Error("a child did not report ready")
		}
	}
	for _, in := range gos {
		fmt.Fprintln(in, "go")
		in.Close()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	worst := storetest.MaxInWindow(grants, crossPer)
	t.Logf("%d grants from %d processes (%v), at most %d in one %v interval; %d refusals sampled", len(grants), crossProcs, perProc, worst, crossPer, len(refusals))
	if worst > crossN {
		t.Fatalf("%d grants inside one %v interval across processes, limit %d", worst, crossPer, crossN)
	}
	// The server reads its clock in whole microseconds.
	if bad := storetest.RefusedWithRoom(grants, refusals, crossN, crossPer+time.Millisecond); len(bad) > 0 {
		t.Fatalf("%d of %d refusals (a sample) came while fewer than %d grants could have been in the %v before them; the first: %v", len(bad), len(refusals), crossN, crossPer, bad[0])
	}
	for i, n := range perProc {
		if n == 0 {
			return fmt.Sprintf("process %d got no grant: it did not take part", i)
		}
	}
	if len(grants) <= crossN || len(refusals) == 0 {
		return fmt.Sprintf("%d grants and %d refusals: the key was not contended enough to show slots freed by time granted again", len(grants), len(refusals))
	}
	return ""
}

// childMain is one process of TestCrossProcessStrict: once told to go, it prints
// "G start end" (unix nanoseconds) for each grant it receives and, at the end, the same
// with "R" for a sample of its refusals.
func childMain() int {
	parts := strings.Split(os.Getenv(childEnv), ",")
	if len(parts) != 2 {
		fmt.Fprintln(os.Stderr, "child: bad", childEnv)
		return 2
	}
	c := redis.NewClient(&redis.Options{Addr: parts[0]})
	defer c.Close()
	s := redisstore.New(c, roomy, redisstore.WithPrefix(parts[1]))
	q := core.Query{Policy: mustPolicy(core.Rate{Count: crossN, Period: crossPer}), Key: "shared"}
	fmt.Println("ready")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Fprintln(os.Stderr, "child: waiting to go:", err)
		return 2
	}
	deadline := time.Now().Add(crossRun)
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	var wg sync.WaitGroup
	failed := false
	for g := range crossWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(os.Getpid()), uint64(g)))
			var sample [][2]int64
			seen := 0
			defer func() {
				mu.Lock()
				for _, r := range sample {
					fmt.Fprintf(w, "R %d %d\n", r[0], r[1])
				}
				mu.Unlock()
			}()
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
					fmt.Fprintf(w, "G %d %d\n", start.UnixNano(), end.UnixNano())
					mu.Unlock()
					continue
				}
				r := [2]int64{start.UnixNano(), end.UnixNano()}
				if seen++; len(sample) < crossSample {
					sample = append(sample, r)
				} else if i := rng.IntN(seen); i < crossSample {
					sample[i] = r
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
