package otellimit_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// downReleaser is a store that is down, and can give grants back (so that
// core.WithCountWhen accepts it).
type downReleaser struct{}

func (downReleaser) Decide(context.Context, core.Query) (core.Decision, error) {
	return core.Decision{}, errors.New("down")
}
func (downReleaser) Release(context.Context, core.Query, int64) error { return errors.New("down") }

// Released follows Admitted: under FailLocal a request the local store admits is recorded
// as store_error, and giving its slot back was recorded as released too, so admitted less
// released went below zero.
func TestReleasedOnlyAfterAdmitted(t *testing.T) {
	m, reader := setup()
	mux := http.NewServeMux()
	mux.Handle("GET /login", nethttp.Limit(3, time.Minute, core.WithStore(downReleaser{}),
		core.WithFailMode(core.FailLocal), core.WithCountWhen(core.Failed),
		core.WithErrorHook(func(context.Context, error) {}), m.Option())(ok))
	got := send(mux, "/login", "192.0.2.1:1234", 2)
	if want := []int{200, 200}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	assertEqual(t, requests(point{"GET /login", "3/1m", "store_error", 2}), collect(t, reader))
}
