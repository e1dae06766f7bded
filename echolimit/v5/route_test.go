package echolimit_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v5"

	"github.com/reqlimit/reqlimit/core"
	echolimit "github.com/reqlimit/reqlimit/echolimit/v5"
)

// Echo v5 answers some requests no route of the application's matches through routes of
// its own: a group with middleware registers catch-all 404 routes, and a path registered
// for another method is a 405 that reports that path. Each is still a pattern, not the
// request's path: a client that makes up paths gets no fresh buckets.
func TestRequestsWithoutARouteGetNoBucketsOfTheirOwn(t *testing.T) {
	group := echo.New()
	// Echo runs the group's middleware for the group's 404s too.
	group.Group("/g", echolimit.Limit(2, time.Minute, fresh())).GET("/a", echoOK)
	app := echo.New()
	app.Use(echolimit.Limit(2, time.Minute, fresh()))
	app.GET("/b", echoOK)

	for i, st := range []struct {
		e            *echo.Echo
		method, path string
		want         int
	}{
		{group, "GET", "/g/x1", 404}, {group, "GET", "/g/x2", 404}, {group, "GET", "/g/x3/y", 429},
		{group, "GET", "/g/a", 200},
		{app, "POST", "/b", 405}, {app, "PUT", "/b", 405}, {app, "DELETE", "/b", 429}, {app, "GET", "/b", 429},
	} {
		w := httptest.NewRecorder()
		st.e.ServeHTTP(w, httptest.NewRequest(st.method, st.path, nil))
		if w.Code != st.want {
			t.Errorf("request %d, %s %s: status %d, want %d", i+1, st.method, st.path, w.Code, st.want)
		}
	}
}

// An empty pattern before routing, from c.Path(), whatever the request's path.
func TestPreRoutingLimitSeesNoRoute(t *testing.T) {
	var scopes []string
	e := echo.New()
	e.Pre(echolimit.Limit(5, time.Minute, fresh(), core.WithObserver(func(ev core.Event) { scopes = append(scopes, ev.Scope) })))
	e.GET("/user/:id", echoOK)
	for _, p := range []string{"/user/1", "/nowhere"} {
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, p, nil))
	}
	if len(scopes) != 2 || scopes[0] != "" || scopes[1] != "" {
		t.Errorf("scopes %q, want two empty ones", scopes)
	}
}
