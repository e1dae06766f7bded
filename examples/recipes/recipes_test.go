package recipes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	fiber2 "github.com/gofiber/fiber/v2"
	fiber3 "github.com/gofiber/fiber/v3"
	echo4 "github.com/labstack/echo/v4"
	echo5 "github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/echolimit"
	echolimit5 "github.com/reqlimit/reqlimit/echolimit/v5"
	"github.com/reqlimit/reqlimit/fiberlimit"
	fiberlimit3 "github.com/reqlimit/reqlimit/fiberlimit/v3"
	"github.com/reqlimit/reqlimit/ginlimit"
)

// Every Go block of docs/recipes.md is text of recipes.go, white space aside: a recipe
// edited in the docs alone fails here.
func TestDocsShowThisCode(t *testing.T) {
	doc, err := os.ReadFile("../../docs/recipes.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := os.ReadFile("recipes.go")
	if err != nil {
		t.Fatal(err)
	}
	blocks := 0
	for rest := string(doc); ; {
		var block string
		var found bool
		if _, rest, found = strings.Cut(rest, "```go\n"); !found {
			break
		}
		block, rest, _ = strings.Cut(rest, "```\n")
		blocks++
		if !strings.Contains(squash(string(code)), squash(block)) {
			t.Errorf("docs/recipes.md shows code that is not in examples/recipes/recipes.go; copy it there and test it:\n%s", block)
		}
	}
	if blocks == 0 {
		t.Fatal("docs/recipes.md has no Go block")
	}
}

// squash collapses every run of white space to one space.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }

var clients atomic.Uint32

// newClient returns a name no earlier call did: the recipes count in the process-wide
// default store, which outlives one run of a test (go test -count=2).
func newClient() string { return fmt.Sprint(clients.Add(1)) }

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// get sends h a GET from the client at addr, with ctx's values.
func get(h http.Handler, ctx context.Context, addr string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/search", nil).WithContext(ctx)
	r.RemoteAddr = addr
	h.ServeHTTP(w, r)
	return w
}

func TestPlansPickTheirPolicy(t *testing.T) {
	h := search(ok)
	addr := "192.0.2." + fmt.Sprint(clients.Add(1)%250+1) + ":1"
	for _, c := range []struct{ plan, policy string }{
		{"", `"100/1h"`}, {"free", `"100/1h"`}, {"paid", `"1000/1h`}, {"internal", ""},
	} {
		ctx := context.WithValue(context.Background(), planKey{}, c.plan)
		w := get(h, ctx, addr)
		if got := w.Header().Get("RateLimit-Policy"); w.Code != 200 || !strings.HasPrefix(got, c.policy) || (c.policy == "") != (got == "") {
			t.Errorf("plan %q: %d, RateLimit-Policy %q; want 200 and %s", c.plan, w.Code, got, c.policy)
		}
	}
}

func TestFailedLoginsCountAndReset(t *testing.T) {
	user := "user" + newClient()
	// The handler answers 401 to a wrong password; the middleware before the limit names
	// the user, as the recipe expects.
	h := login(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("password") != "right" {
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	try := func(password string) int {
		w := httptest.NewRecorder()
		r := httptest.NewRequest("POST", "/login?password="+password, nil)
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), userKey{}, user)))
		return w.Code
	}
	ctx := context.Background()
	left := func() int {
		t.Helper()
		n, err := attemptsLeft(ctx, user)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	if code := try("right"); code != 200 || left() != 5 {
		t.Fatalf("a good login: %d, %d attempts left; want 200 and 5 (it does not count)", code, left())
	}
	for i := range 5 {
		if code := try("wrong"); code != 401 {
			t.Fatalf("failed attempt %d: %d, want 401", i+1, code)
		}
	}
	if code, n := try("right"), left(); code != 429 || n != 0 {
		t.Fatalf("after 5 failures: %d, %d left; want 429 and 0", code, n)
	}
	if err := passwordWasReset(ctx, user); err != nil {
		t.Fatal(err)
	}
	if n, code := left(), try("right"); n != 5 || code != 200 {
		t.Errorf("after the reset: %d left, then %d; want 5 and 200", n, code)
	}
}

// checkJSONRefusal wants a 429 in JSON that still carries Retry-After and the RateLimit
// fields of a limit of count per minute.
func checkJSONRefusal(t *testing.T, framework string, status int, header http.Header, body []byte, count int) {
	t.Helper()
	var got struct {
		Error string `json:"error"`
		Wait  int    `json:"retry_after_seconds"`
	}
	if err := json.Unmarshal(body, &got); err != nil || status != 429 || got.Error != "too many requests" || got.Wait < 59 || got.Wait > 60 {
		t.Errorf("%s: %d %s (%v); want 429 and the JSON refusal", framework, status, body, err)
	}
	if !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		t.Errorf("%s: Content-Type %q", framework, header.Get("Content-Type"))
	}
	if ra, rl := header.Get("Retry-After"), header.Get("RateLimit"); (ra != "60" && ra != "59") || !strings.HasPrefix(rl, fmt.Sprintf(`"%d/1m";r=0;t=`, count)) {
		t.Errorf("%s: Retry-After %q, RateLimit %q; want the refusal's fields", framework, ra, rl)
	}
}

func TestJSONRefusalKeepsTheFields(t *testing.T) {
	h := hello(ok)
	addr := "198.51.100." + fmt.Sprint(clients.Add(1)%250+1) + ":1"
	var w *httptest.ResponseRecorder
	for range 4 {
		w = get(h, context.Background(), addr)
	}
	checkJSONRefusal(t, "net/http", w.Code, w.Header(), w.Body.Bytes(), 3)
}

// Each framework's deny handler of the recipe, on a limit of 1 a minute with a store of its
// own: the second request is refused in JSON.
func TestEveryFrameworkRefusesInJSON(t *testing.T) {
	fresh := func() core.Option { return core.WithStore(core.NewMemoryStore(nil)) }
	serve := func(h http.Handler) (int, http.Header, []byte) {
		var w *httptest.ResponseRecorder
		for range 2 {
			w = httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		}
		return w.Code, w.Header(), w.Body.Bytes()
	}

	gin.SetMode(gin.ReleaseMode)
	g := gin.New()
	g.GET("/", ginlimit.Limit(1, time.Minute, fresh(), ginJSON), func(c *gin.Context) { c.String(200, "ok") })
	status, header, body := serve(g)
	checkJSONRefusal(t, "Gin", status, header, body, 1)

	e4 := echo4.New()
	e4.GET("/", func(c echo4.Context) error { return c.String(200, "ok") }, echolimit.Limit(1, time.Minute, fresh(), echo4JSON))
	status, header, body = serve(e4)
	checkJSONRefusal(t, "Echo v4", status, header, body, 1)

	e5 := echo5.New()
	e5.GET("/", func(c *echo5.Context) error { return c.String(200, "ok") }, echolimit5.Limit(1, time.Minute, fresh(), echo5JSON))
	status, header, body = serve(e5)
	checkJSONRefusal(t, "Echo v5", status, header, body, 1)

	f2 := fiber2.New()
	f2.Get("/", fiberlimit.Limit(1, time.Minute, fresh(), fiber2JSON), func(c *fiber2.Ctx) error { return c.SendString("ok") })
	for i := range 2 {
		resp, err := f2.Test(httptest.NewRequest("GET", "/", nil), -1)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if i == 1 {
			checkJSONRefusal(t, "Fiber v2", resp.StatusCode, resp.Header, body, 1)
		}
	}

	f3 := fiber3.New()
	f3.Get("/", fiberlimit3.Limit(1, time.Minute, fresh(), fiber3JSON), func(c fiber3.Ctx) error { return c.SendString("ok") })
	for i := range 2 {
		resp, err := f3.Test(httptest.NewRequest("GET", "/", nil), fiber3.TestConfig{Timeout: 0})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if i == 1 {
			checkJSONRefusal(t, "Fiber v3", resp.StatusCode, resp.Header, body, 1)
		}
	}
}
