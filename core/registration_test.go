package core

import "testing"

// The registration site is the first frame outside the library: the applications this
// repository ships (examples, docs' programs) and test helpers are callers, like any
// application, or their limits would all be named by the testing package's frames.
func TestLibraryFrames(t *testing.T) {
	for fn, want := range map[string]bool{
		"github.com/reqlimit/reqlimit/core.build":                    true,
		"github.com/reqlimit/reqlimit/nethttp.Limit":                 true,
		"github.com/reqlimit/reqlimit/echolimit/v5.Limit":            true,
		"github.com/reqlimit/reqlimit/core/redisstore.New":           true,
		"github.com/reqlimit/reqlimit/examples/chi.newRouter":        false,
		"github.com/reqlimit/reqlimit/grpclimit/example.main":        false,
		"github.com/reqlimit/reqlimit/docs/compare.measure":          false,
		"github.com/reqlimit/reqlimit/internal/adaptertest.Run":      false,
		"github.com/reqlimit/reqlimit/ginlimit_test.TestConformance": false,
		"main.main":                   false,
		"github.com/other/app.routes": false,
	} {
		if got := isLibraryFrame(fn); got != want {
			t.Errorf("isLibraryFrame(%q) = %v, want %v", fn, got, want)
		}
	}
}
