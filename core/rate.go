package core

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/reqlimit/reqlimit/internal/bounds"
)

// A Rate is one limit: at most Count units in any interval of length Period.
type Rate struct {
	Count  int
	Period time.Duration
}

// maxPeriod, about 146 years: times plus a period never overflow int64 nanoseconds. The
// other bounds are package bounds', which the stores and tools share.
const maxPeriod = time.Duration(1 << 62)

// belowOne is the error of a count below 1, given as text.
func belowOne(count string) error {
	return fmt.Errorf("count %s: want at least 1 request per period (to refuse every request, answer it yourself)", count)
}

// aboveLargest is the error of a count above bounds.LargestCount, given as text.
func aboveLargest(count string) error {
	return fmt.Errorf("count %s is above the largest, %d", count, int64(bounds.LargestCount))
}

// exact reports whether r is kept as an exact log of grant times.
func (r Rate) exact() bool { return r.Count <= bounds.LargestExact }

// validate reports why r cannot be enforced, naming the bad value.
func (r Rate) validate() error {
	if r.Count < 1 {
		return fmt.Errorf("%w: %w", belowOne(strconv.Itoa(r.Count)), ErrBadPolicy)
	}
	if int64(r.Count) > bounds.LargestCount { // as int64: on 32 bits it is above any int
		return fmt.Errorf("%w: %w", aboveLargest(strconv.Itoa(r.Count)), ErrBadPolicy)
	}
	if r.Period <= 0 {
		return fmt.Errorf("period %v: want a positive duration, such as time.Minute: %w", r.Period, ErrBadPolicy)
	}
	if r.Period > maxPeriod {
		return fmt.Errorf("period %v is longer than the longest, %v: %w", r.Period, maxPeriod, ErrBadPolicy)
	}
	if !r.exact() && r.Period < bounds.Buckets {
		return fmt.Errorf("period %v is shorter than %d ns for count %d: %w", r.Period, bounds.Buckets, r.Count, ErrBadPolicy)
	}
	return nil
}

// String returns the text form, such as "3/1m", which ParsePolicy reads back.
func (r Rate) String() string {
	return strconv.Itoa(r.Count) + "/" + formatPeriod(r.Period)
}

// periodUnits lists the units a period is printed in, largest first. A period prints in the
// largest unit that divides it exactly, so the text round-trips without float noise.
var periodUnits = []struct {
	suffix string
	d      time.Duration
}{
	{"d", 24 * time.Hour}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second},
	{"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", time.Nanosecond},
}

func formatPeriod(d time.Duration) string {
	for _, u := range periodUnits {
		if d > 0 && d%u.d == 0 {
			return strconv.FormatInt(int64(d/u.d), 10) + u.suffix
		}
	}
	return d.String()
}

// parsePeriod reads a period such as "1m", "2s", "1h30m", "500ms", ".5s", "1d" or a bare
// unit ("s" = "1s"). It accepts days, which time.ParseDuration does not.
func parsePeriod(s string) (time.Duration, error) {
	if s == "" {
		return 0, fmt.Errorf("empty period: want a duration such as 1m")
	}
	orig := s
	switch c := s[0]; {
	case c == '-' || c == '+':
		return 0, fmt.Errorf("bad period %q: want a duration without a sign, such as 1m", orig)
	case c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == 0xc2 || c == 0xce:
		s = "1" + s // a bare unit, "µs" included; ".5s" is a number and keeps its meaning
	}
	if strings.HasSuffix(s, "d") {
		n, err := strconv.ParseInt(s[:len(s)-1], 10, 64)
		switch maxDays := int64(maxPeriod / (24 * time.Hour)); {
		case errors.Is(err, strconv.ErrRange) || err == nil && n > maxDays:
			return 0, fmt.Errorf("bad period %q: want at most %dd", orig, maxDays)
		case err != nil:
			return 0, fmt.Errorf("bad period %q: want whole days such as 1d, or a duration such as 36h", orig)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("bad period %q: want a duration such as 1m, 2s, 500ms or 1d", orig)
	}
	return d, nil
}
