// Package sfvtest parses reqlimit's RateLimit fields with a Structured Field Values
// (RFC 9651) parser that is not reqlimit's own. It is a module of its own so that the parser
// stays out of the library's requirements.
package sfvtest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dunglas/httpsfv"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/internal/bounds"
	"github.com/reqlimit/reqlimit/nethttp"
)

// Every RateLimit and RateLimit-Policy value parses as an RFC 9651 List of Items named by
// a String, with the draft's integer parameters; on a refusal, t agrees with Retry-After.
// The limits cover refusals, several rates, the largest counts, long and sub-second
// periods, and stacked limits with the same policy.
func TestFieldsParseAsStructuredFields(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		name     string
		policy   string
		opts     []core.Option
		stack    string // a second limit in front, or ""
		requests int
	}{
		{"one-rate", "3/1m", nil, "", 5},
		{"several-rates", "2/1s,3/1m,100/1h", nil, "", 5},
		{"big-count", "1000000000000/365d", nil, "", 3},
		{"largest-count", strconv.FormatInt(bounds.LargestCount, 10) + "/1d", nil, "", 3},
		{"long-period", "5/8760h", nil, "", 7},
		{"sub-second", "2/250ms,3/1m", nil, "", 4}, // 3/1m: a refusal however slow the machine
		{"bounded", "100000/1s", nil, "", 3},
		{"stacked-same-policy", "3/1m", nil, "3/1m", 5},
		{"stacked-other-policy", "3/1m", nil, "10/1h,3/1m", 5},
		{"scoped", "2/1m", []core.Option{core.WithScope("login")}, "", 3},
		{"partition-key", "2/1s,3/1m", []core.Option{core.WithPartitionKey(secret)}, "", 4},
		{"partition-key-stacked", "3/1m", []core.Option{core.WithPartitionKey(secret)}, "3/1m", 5},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := append([]core.Option{core.WithStore(core.NewMemoryStore(nil))}, c.opts...)
			mw, err := nethttp.New(c.policy, opts...)
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle("GET /a", mw(ok))
			var h http.Handler = mux
			if c.stack != "" {
				outer, err := nethttp.New(c.stack, core.WithStore(core.NewMemoryStore(nil)), nethttp.WithMux(mux))
				if err != nil {
					t.Fatal(err)
				}
				h = outer(mux)
			}
			refusals := 0
			for i := range c.requests {
				w := httptest.NewRecorder()
				r := httptest.NewRequest("GET", "/a", nil)
				h.ServeHTTP(w, r)
				policy := check(t, i, w.Header(), "RateLimit-Policy", "q", "w")
				state := check(t, i, w.Header(), "RateLimit", "r", "t")
				if len(policy) != len(state) && c.stack == "" && !strings.Contains(c.policy, ",") {
					t.Errorf("request %d: %d policy members, %d state members", i+1, len(policy), len(state))
				}
				names := map[string]bool{}
				for _, m := range policy {
					if names[m] {
						t.Errorf("request %d: two RateLimit-Policy members named %q", i+1, m)
					}
					names[m] = true
				}
				for _, m := range state {
					if !names[m] {
						t.Errorf("request %d: RateLimit member %q names no policy", i+1, m)
					}
				}
				if w.Code == http.StatusTooManyRequests {
					refusals++
					ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
					if err != nil || ra < 1 {
						t.Fatalf("request %d: Retry-After %q", i+1, w.Header().Get("Retry-After"))
					}
					if !anyT(w.Header(), ra) {
						t.Errorf("request %d: Retry-After %d, and no RateLimit member with t=%d", i+1, ra, ra)
					}
				}
			}
			if c.requests > 3 && !strings.HasPrefix(c.name, "big") && !strings.HasPrefix(c.name, "largest") && refusals == 0 && c.name != "bounded" {
				t.Errorf("no refusal in %d requests: the refusal's fields went unchecked", c.requests)
			}
		})
	}
}

// check parses the lines of field as one List (lines join with commas) and returns its
// members' names, failing t unless each is an Item whose value is a String and whose
// parameters include the integers named.
func check(t *testing.T, i int, h http.Header, field string, params ...string) []string {
	t.Helper()
	lines := h.Values(field)
	if len(lines) == 0 {
		t.Fatalf("request %d: no %s", i+1, field)
	}
	list, err := httpsfv.UnmarshalList(lines)
	if err != nil {
		t.Fatalf("request %d: %s %q does not parse as an RFC 9651 List: %v", i+1, field, lines, err)
	}
	var names []string
	for _, m := range list {
		item, ok := m.(httpsfv.Item)
		if !ok {
			t.Fatalf("request %d: %s member %v is not an Item", i+1, field, m)
		}
		name, ok := item.Value.(string)
		if !ok {
			t.Fatalf("request %d: %s member %v is not named by a String", i+1, field, item.Value)
		}
		names = append(names, name)
		if v, ok := item.Params.Get("pk"); ok {
			if b, isBytes := v.([]byte); !isBytes || len(b) != 12 {
				t.Fatalf("request %d: %s member %q: pk is %v (%T), want a 12-byte Byte Sequence", i+1, field, name, v, v)
			}
		}
		for _, p := range params {
			v, ok := item.Params.Get(p)
			if _, isInt := v.(int64); !ok && !(field == "RateLimit-Policy" && p == "w") || ok && !isInt {
				t.Fatalf("request %d: %s member %q: parameter %s is %v (%T), want an Integer", i+1, field, name, p, v, v)
			}
		}
	}
	return names
}

// anyT reports whether a RateLimit member has t equal to secs.
func anyT(h http.Header, secs int) bool {
	list, err := httpsfv.UnmarshalList(h.Values("RateLimit"))
	if err != nil {
		return false
	}
	for _, m := range list {
		if v, ok := m.(httpsfv.Item).Params.Get("t"); ok && v == int64(secs) {
			return true
		}
	}
	return false
}

const secret = "0123456789abcdef-test-secret"

// The partition key names the client's bucket without showing its key: the same client
// gets the same pk from two instances sharing the secret, another client another pk, and
// the address appears nowhere in the field.
func TestPartitionKey(t *testing.T) {
	pk := func(remote string) []byte {
		mw := nethttp.Limit(5, time.Minute, core.WithStore(core.NewMemoryStore(nil)), core.WithPartitionKey(secret))
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/a", nil)
		r.RemoteAddr = remote
		mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})).ServeHTTP(w, r)
		if f := w.Header().Get("RateLimit-Policy"); strings.Contains(f, "192.0.2") || !strings.Contains(f, ";pk=:") {
			t.Fatalf("RateLimit-Policy %q: want a pk, and no address", f)
		}
		list, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit-Policy"))
		if err != nil {
			t.Fatal(err)
		}
		v, _ := list[0].(httpsfv.Item).Params.Get("pk")
		b, _ := v.([]byte)
		// The draft gives the RateLimit member the same pk: whose remaining quota it is.
		state, err := httpsfv.UnmarshalList(w.Header().Values("RateLimit"))
		if err != nil {
			t.Fatal(err)
		}
		v, _ = state[0].(httpsfv.Item).Params.Get("pk")
		if got, _ := v.([]byte); !bytes.Equal(got, b) {
			t.Fatalf("RateLimit %q: pk %x, want RateLimit-Policy's %x", w.Header().Values("RateLimit"), got, b)
		}
		return b
	}
	a1, a2, b := pk("192.0.2.1:1000"), pk("192.0.2.1:2000"), pk("192.0.2.2:1000")
	if len(a1) != 12 || string(a1) != string(a2) || string(a1) == string(b) {
		t.Fatalf("pk of one client %x and %x, of another %x: want equal, then different", a1, a2, b)
	}
	if _, err := nethttp.New("5/1m", core.WithPartitionKey("short")); err == nil || !strings.Contains(err.Error(), "16") {
		t.Fatalf("a 5-byte secret: error %v, want one asking for 16 bytes", err)
	}
}
