package core_test

import (
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
