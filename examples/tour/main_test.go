package main

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestTour(t *testing.T) {
	var out strings.Builder
	start := time.Now()
	if err := run(&out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	took := time.Since(start)
	for _, want := range []string{"429", "Too Many Requests", "forged X-Forwarded-For", "net/http on", "Gin on", "Echo v4 on", "Echo v5 on", "Fiber v2 on", "Fiber v3 on"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("tour output lacks %q:\n%s", want, out.String())
		}
	}
	// The spent quota's wait, t=60 on a machine that keeps up: whole seconds, rounded up,
	// until the first grant leaves the window, so a machine that stalls between the tour's
	// requests takes off as many seconds as the tour took, at most.
	spent := regexp.MustCompile(`"3/1m";r=0;t=(\d+)`).FindAllStringSubmatch(out.String(), -1)
	if len(spent) == 0 {
		t.Fatalf("tour output lacks %q:\n%s", `"3/1m";r=0;t=60`, out.String())
	}
	lo := 60 - int(math.Ceil(took.Seconds()))
	for _, m := range spent {
		if n, _ := strconv.Atoi(m[1]); n < lo || n > 60 {
			t.Fatalf("tour output has %s, want t=60, or at least %d after a tour of %v:\n%s", m[0], lo, took, out.String())
		}
	}
}
