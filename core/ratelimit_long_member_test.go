package core

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// copyingSetter keeps copies of the values it is given, as fasthttp does.
type copyingSetter map[string]string

func (s copyingSetter) Set(name, value string) { s[name] = strings.Clone(value) }

// TestLongRateLimitMemberIsWhole checks that a RateLimit member longer than the buffer a
// value is formatted in arrives whole, through a setter that copies and through a
// HeaderMap that keeps the value, and that a later response does not change it.
func TestLongRateLimitMemberIsWhole(t *testing.T) {
	al, err := buildRate(2_000_000_000, 100*time.Hour-time.Nanosecond, []Option{WithShortPeriods()})
	if err != nil {
		t.Fatal(err)
	}
	l := al.(*limiter)
	member := func(remaining int) string {
		return `"` + l.rateNames[0] + `";r=` + strconv.Itoa(remaining) + ";t=360000"
	}
	verdictFor := func(remaining int) *verdict {
		return &verdict{Allowed: true, Decision: Decision{Allowed: true, Rate: l.policy.rates[0],
			Remaining: remaining, Reset: 100*time.Hour - time.Nanosecond}}
	}
	if n := len(member(1_999_999_999)); n <= len(fieldBox{}.b) {
		t.Fatalf("member %s of %d bytes fits the box: the test would not reach the long path", member(1_999_999_999), n)
	}
	copied := copyingSetter{}
	kept := hook.HeaderMap{}
	l.setHeaders(copied, verdictFor(1_999_999_999), "k")
	l.setHeaders(kept, verdictFor(1_999_999_999), "k")
	for range 3 { // later responses reuse the pooled boxes
		l.setHeaders(copyingSetter{}, verdictFor(1_000_000_000), "k")
		l.setHeaders(hook.HeaderMap{}, verdictFor(1_000_000_000), "k")
	}
	want := member(1_999_999_999)
	if got := copied[hook.HeaderRateLimit]; got != want {
		t.Errorf("copying setter: RateLimit = %q, want %q", got, want)
	}
	if got := kept[hook.HeaderRateLimit]; len(got) != 1 || got[0] != want {
		t.Errorf("HeaderMap: RateLimit = %q, want [%q]", got, want)
	}
}
