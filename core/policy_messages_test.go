package core_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/reqlimit/reqlimit/core"
)

// A bad policy's error names the bad item and the fix ("want COUNT/PERIOD, such as 3/1m",
// "want a duration such as 1m, 2s, 500ms or 1d"), also for a bad count, a bad period that
// ends in d, and an empty period, which used to say what is wrong but not what would do.
func TestPolicyErrorsNameTheFix(t *testing.T) {
	for _, text := range []string{"3.5/1m", "1e3/1m", "ten/1m", "3/1.5d", "3/1 d", "3/1h1d", "3/", "3/999999999999d"} {
		_, err := core.ParsePolicy(text)
		if err == nil {
			t.Fatalf("%q parsed", text)
		}
		if !strings.Contains(err.Error(), "want") {
			t.Errorf("ParsePolicy(%q): %v: names no fix (what a count or period should look like)", text, err)
		}
	}
}

// A policy error that names the fix names one that works: "3/106752d" was refused with
// "want at most 106751d", and "3/106751d" then refused too (the longest period is 2^62 ns,
// 53375 days); a count of days too large for an int64 was told to "want whole days such
// as 1d", which it already was.
func TestPolicyErrorsForTooManyDaysNameAWorkingFix(t *testing.T) {
	_, err := core.ParsePolicy("3/106752d")
	if err == nil {
		t.Fatal("3/106752d accepted")
	}
	if m := regexp.MustCompile(`want at most (\d+d)`).FindStringSubmatch(err.Error()); m == nil {
		t.Errorf("3/106752d: %v, want the longest period named", err)
	} else {
		if _, err2 := core.ParsePolicy("3/" + m[1]); err2 != nil {
			t.Errorf("3/106752d: %v\nbut the suggested 3/%s is refused too: %v", err, m[1], err2)
		}
	}
	_, err = core.ParsePolicy("3/99999999999999999999d")
	if err == nil || strings.Contains(err.Error(), "want whole days") {
		t.Errorf("3/99999999999999999999d (whole days, too many): %v", err)
	}
}
