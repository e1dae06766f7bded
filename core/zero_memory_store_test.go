package core_test

import (
	"strings"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/adapter"
)

// A MemoryStore not made by NewMemoryStore has no clock: taken as it is, it would pass
// registration and then panic in every request. Each place that takes a store refuses
// it, naming the fix.
func TestZeroMemoryStoreRefused(t *testing.T) {
	for name, f := range map[string]func() error{
		"WithStore": func() error {
			_, err := adapter.New(3, time.Minute, core.WithStore(new(core.MemoryStore)))
			return err
		},
		"NewCounter": func() error {
			_, err := core.NewCounter("c", 3, time.Minute, &core.MemoryStore{})
			return err
		},
		"SetDefaultStore": func() error { return core.SetDefaultStore(new(core.MemoryStore)) },
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			func() {
				defer func() {
					if p := recover(); p != nil {
						t.Fatalf("panicked: %v", p)
					}
				}()
				err = f()
			}()
			if err == nil || !strings.Contains(err.Error(), "NewMemoryStore") || !strings.Contains(err.Error(), "*core.MemoryStore") {
				t.Fatalf("a MemoryStore not made by NewMemoryStore: got %v, want an error naming it and core.NewMemoryStore", err)
			}
		})
	}
}
