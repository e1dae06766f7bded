package core_test

import (
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/storetest"
)

func TestMemoryStoreConformance(t *testing.T) {
	t.Run("VirtualClock", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			clock := core.NewManualClock(time.Unix(1_700_000_000, 0))
			return storetest.Harness{
				Store:   core.NewMemoryStore(core.WithClock(clock)),
				Advance: func(d time.Duration) { clock.Advance(d) },
			}
		})
	})
	t.Run("RealClock", func(t *testing.T) {
		t.Parallel()
		storetest.Run(t, func(t *testing.T) storetest.Harness {
			return storetest.Harness{Store: core.NewMemoryStore()}
		})
	})
}
