package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
	"github.com/reqlimit/reqlimit/internal/bounds"
)

func TestParsePolicyRoundTrips(t *testing.T) {
	for in, want := range map[string]string{
		"3/1m":                "3/1m",
		"3/60s":               "3/1m",
		"500/2s,2000/10s":     "500/2s,2000/10s",
		" 500/2s , 2000/10s ": "500/2s,2000/10s",
		"10/s":                "10/1s",
		"1/1d":                "1/1d",
		"5/90m":               "5/90m",
		"5/1h30m":             "5/90m",
		"7/250ms":             "7/250ms",
		"100/1500ms":          "100/1500ms",
		"10000000/1s":         "10000000/1s",
	} {
		p, err := core.ParsePolicy(in)
		if err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		if p.String() != want {
			t.Fatalf("%q printed as %q, want %q", in, p, want)
		}
		again, err := core.ParsePolicy(p.String())
		if err != nil || again.String() != p.String() {
			t.Fatalf("%q does not read back: %v %v", p, again, err)
		}
	}
}

func TestParsePolicyErrorsPointAtTheBadPart(t *testing.T) {
	for in, wantParts := range map[string][]string{
		"":                 {`policy ""`, "want COUNT/PERIOD"},
		"3":                {`"3"`, "want COUNT/PERIOD"},
		"x/1m":             {`"x/1m"`, `bad count "x"`},
		"3/1m,5/fortnight": {"offset 5", `bad period "fortnight"`},
		"3/1m,0/1s":        {"rate 2 (0 per 1s)", "count 0"},
		"3/-1s":            {"offset 0", `bad period "-1s"`},
		"3/0s":             {"period 0s"},
		"300/50ns":         {"period 50ns is shorter than 100 ns"},
	} {
		_, err := core.ParsePolicy(in)
		if err == nil {
			t.Fatalf("%q parsed", in)
		}
		for _, part := range wantParts {
			if !strings.Contains(err.Error(), part) {
				t.Fatalf("%q: error %q lacks %q", in, err, part)
			}
		}
	}
}

func TestNewPolicyRejectsBadValues(t *testing.T) {
	for _, c := range []struct {
		r    core.Rate
		want error
	}{
		{core.Rate{Count: 0, Period: time.Second}, core.ErrBadPolicy},
		{core.Rate{Count: -3, Period: time.Second}, core.ErrBadPolicy},
		{core.Rate{Count: 3, Period: 0}, core.ErrBadPolicy},
		{core.Rate{Count: 3, Period: -time.Minute}, core.ErrBadPolicy},
	} {
		if _, err := core.NewPolicy(c.r); !errors.Is(err, c.want) {
			t.Fatalf("%+v: err %v, want %v", c.r, err, c.want)
		}
	}
	if _, err := core.NewPolicy(); !errors.Is(err, core.ErrBadPolicy) {
		t.Fatalf("no rates: %v", err)
	}
}

func TestChoosesFormPerRate(t *testing.T) {
	if exact, bounded := (core.Rate{Count: bounds.LargestExact, Period: time.Second}), (core.Rate{Count: bounds.LargestExact + 1, Period: time.Second}); !exact.Exact() || bounded.Exact() {
		t.Fatalf("the form switches above %d", bounds.LargestExact)
	}
	p := mustParse("3/1m")
	if p.StateLen() != 4 { // write index + 3 grant times
		t.Fatalf("3/1m state is %d slots", p.StateLen())
	}
}

// A rate given twice, however spelled, is a slip in configuration: refused, naming both.
func TestPolicyRefusesRepeatedRate(t *testing.T) {
	for _, build := range []struct {
		name string
		f    func() error
	}{
		{`ParsePolicy("3/1m,3/1m")`, func() error { _, err := core.ParsePolicy("3/1m,3/1m"); return err }},
		{`ParsePolicy("3/1m,10/1h,3/60s")`, func() error { _, err := core.ParsePolicy("3/1m,10/1h,3/60s"); return err }},
		{"Limit(3, time.Minute, WithRate(3, time.Minute))", func() error {
			_, err := adapter.New(3, time.Minute, core.WithRate(3, time.Minute))
			return err
		}},
	} {
		err := build.f()
		if !errors.Is(err, core.ErrBadPolicy) || !strings.Contains(err.Error(), "repeats rate 1") || !strings.Contains(err.Error(), "3/1m") {
			t.Errorf("%s: %v; want ErrBadPolicy naming the repeated rate", build.name, err)
		}
	}
	if _, err := core.ParsePolicy("3/1m,5/1m"); err != nil {
		t.Errorf("3/1m,5/1m (same period, other counts): %v", err)
	}
}
