package core_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

// FuzzParsePolicy holds ParsePolicy to the meaning its documentation gives: every policy it
// accepts has one rate per comma-separated item, each with the item's count and the period
// time.ParseDuration gives its text (with days, and "s" for "1s"), never a digit added; it
// reads back from its String; and no input panics.
func FuzzParsePolicy(f *testing.F) {
	for _, s := range []string{"3/1m", "10/.5s", "3/.s", "3/.5m", "500/2s,2000/10s", " 500/2s , 2000/10s ",
		"1/1d", "3/d", "3/60ns", "5/1h30m", "7/µs", "1e3/1s", "3/-1s", "10/s", "1000000000000/365d",
		"9223372036854775807/1s", "110000000000000/d", "3/1.5d", "3/1m,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := core.ParsePolicy(text)
		if err != nil {
			return
		}
		items, rates := strings.Split(text, ","), p.Rates()
		if len(rates) != len(items) {
			t.Fatalf("%q: %d rates from %d items", text, len(rates), len(items))
		}
		for i, item := range items {
			count, period, _ := strings.Cut(strings.TrimSpace(item), "/")
			n, err := strconv.Atoi(strings.TrimSpace(count))
			if err != nil || rates[i].Count != n {
				t.Fatalf("%q: rate %d has count %d, its text says %q", text, i+1, rates[i].Count, count)
			}
			want, ok := meaning(strings.TrimSpace(period))
			if !ok || rates[i].Period != want {
				t.Fatalf("%q: rate %d has period %v, its text %q means %v (%v)", text, i+1, rates[i].Period, period, want, ok)
			}
			if want < bounds.ShortestPeriod {
				t.Fatalf("%q: period %v accepted, below the shortest period", text, want)
			}
		}
		again, err := core.ParsePolicy(p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("%q prints as %q, which reads back as %v, %v", text, p, again, err)
		}
	})
}

// meaning is what a period's text means: time.ParseDuration's reading, plus whole days
// ("2d") and a bare unit standing for one of it ("s", "d").
func meaning(text string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(text, "d"); ok {
		if days == "" {
			return 24 * time.Hour, true
		}
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n < 0 || n > int64(1<<63-1)/int64(24*time.Hour) {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	if text != "" && (text[0] < '0' || text[0] > '9') && text[0] != '.' {
		text = "1" + text
	}
	d, err := time.ParseDuration(text)
	return d, err == nil
}
