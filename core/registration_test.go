package core

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

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

// sharedStore is a store other than the memory store: one that other processes may share.
type sharedStore struct{ Store }

// Where no application frame registered a limit (here a goroutine of package core's own,
// whose frames are all the library's), its identity is unknown: on a store that other
// processes may share it would share buckets with every such limit of its policy, so
// registration fails, naming WithScope; with WithScope, or on the memory store, which no
// other process sees, it registers.
func TestUnknownSiteOnASharedStoreIsRefused(t *testing.T) {
	shared := WithStore(sharedStore{NewMemoryStore(nil)})
	register := func(panics bool, opts ...Option) (panicked any, err error) {
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() { panicked = recover() }()
			if panics {
				mustBuildRate(3, time.Minute, opts)
				return
			}
			_, err = buildRate(3, time.Minute, opts)
		}()
		<-done
		return panicked, err
	}
	_, err := register(false, shared)
	if !errors.Is(err, errNoSite) || !strings.Contains(err.Error(), "WithScope(name)") || !strings.Contains(err.Error(), "3/1m") {
		t.Errorf("unknown site on a shared store: error %v, want one naming the policy and WithScope", err)
	}
	if p, _ := register(true, shared); p == nil || !strings.Contains(fmt.Sprint(p), "WithScope(name)") {
		t.Errorf("unknown site on a shared store, panicking: %v, want a panic naming WithScope", p)
	}
	if _, err := register(false, shared, WithScope("login")); err != nil {
		t.Errorf("unknown site on a shared store with WithScope: %v", err)
	}
	if _, err := register(false, WithStore(NewMemoryStore(nil))); err != nil {
		t.Errorf("unknown site on the memory store: %v", err)
	}
	// The same options from a test's own frames: a known site, registered.
	if _, err := buildRate(3, time.Minute, []Option{shared}); err != nil {
		t.Errorf("known site on a shared store: %v", err)
	}
}
