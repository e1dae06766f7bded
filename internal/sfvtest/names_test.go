package sfvtest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/nethttp"
)

// parseNames parses field's lines as one List and returns its members' names; it fails t
// when the field is not a valid Structured Field List of String-named Items.
func parseNames(t *testing.T, h http.Header, field string) []string {
	t.Helper()
	lines := h.Values(field)
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		t.Errorf("%s %q does not parse as an RFC 9651 List: %v", field, lines, err)
		return nil
	}
	var names []string
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok {
			t.Errorf("%s member %v is not an Item", field, m)
			continue
		}
		name, _ := item.Value.(string)
		names = append(names, name)
	}
	return names
}

// stackedHandler mounts inner on GET /a behind outer, an app-wide limit.
func stackedHandler(t *testing.T, outerPolicy string, inner ...func(http.Handler) http.Handler) http.Handler {
	t.Helper()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	mux := http.NewServeMux()
	var h http.Handler = ok
	for i := len(inner) - 1; i >= 0; i-- {
		h = inner[i](h)
	}
	mux.Handle("GET /a", h)
	outer, err := nethttp.New(outerPolicy, core.WithStore(core.NewMemoryStore(nil)), nethttp.WithMux(mux))
	if err != nil {
		t.Fatal(err)
	}
	return outer(mux)
}

// A tier's list members, renamed when another limit on the request took its plain names,
// carry the tier's name, which the application chose: they are still valid Structured
// Field Strings, spelled alike in RateLimit and RateLimit-Policy, whatever the name holds.
func TestTierNamesAreValidStrings(t *testing.T) {
	for _, tier := range []string{`gold "vip"`, "café", "pro\tplan", `a\b`} {
		t.Run(tier, func(t *testing.T) {
			pick := func(r core.Request) string { return r.Header("X-Plan") }
			inner, err := nethttp.New("5/1m", core.WithStore(core.NewMemoryStore(nil)),
				core.WithTiers(pick, map[string]string{tier: "3/1m"}))
			if err != nil {
				t.Fatal(err)
			}
			h := stackedHandler(t, "3/1m", inner)
			w := httptest.NewRecorder()
			r := httptest.NewRequest("GET", "/a", nil)
			r.Header.Set("X-Plan", tier)
			h.ServeHTTP(w, r)
			policy := parseNames(t, w.Header(), "RateLimit-Policy")
			state := parseNames(t, w.Header(), "RateLimit")
			if len(policy) != 2 || len(state) != 2 || policy[1] != state[1] {
				t.Errorf("RateLimit-Policy %q, RateLimit %q: want two members each, named alike", w.Header().Values("RateLimit-Policy"), w.Header().Values("RateLimit"))
			}
		})
	}
}

// Three limits on one request whose policies share a rate: every member of each field has
// a name of its own (the second and third are both the first of their policies).
func TestStackedNamesAreDistinct(t *testing.T) {
	b, err := nethttp.New("3/1m,10/1h", core.WithStore(core.NewMemoryStore(nil)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := nethttp.New("3/1m,20/1h", core.WithStore(core.NewMemoryStore(nil)))
	if err != nil {
		t.Fatal(err)
	}
	h := stackedHandler(t, "3/1m", b, c)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/a", nil))
	for _, field := range []string{"RateLimit-Policy", "RateLimit"} {
		seen := map[string]bool{}
		for _, n := range parseNames(t, w.Header(), field) {
			if seen[n] {
				t.Errorf("%s %q: two members named %q", field, w.Header().Values(field), n)
			}
			seen[n] = true
		}
	}
}
