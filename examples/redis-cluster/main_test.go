package main

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/exampletest"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// TestInstancesShareTheLimit runs two instances of the app on one real 3-master cluster:
// a client that spends its 3 requests on one instance is refused by the other.
func TestInstancesShareTheLimit(t *testing.T) {
	nodes := redistest.Cluster(t, 3)
	var apps []http.Handler
	for range 2 {
		rdb := redis.NewClusterClient(&redis.ClusterOptions{Addrs: redistest.Addrs(nodes), ContextTimeoutEnabled: true})
		t.Cleanup(func() { rdb.Close() })
		// A deadline a loaded machine cannot miss: past it, FailLocal would decide alone,
		// and this test is about the instances sharing the cluster's answer.
		apps = append(apps, newRouter(rdb, redisstore.WithTimeout(10*time.Second)))
	}
	get := func(app http.Handler, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		r.RemoteAddr = "192.0.2.7:4321"
		w := httptest.NewRecorder()
		app.ServeHTTP(w, r)
		return w
	}
	for i, app := range []http.Handler{apps[0], apps[1], apps[0]} {
		if w := get(app, "/user/test"); w.Code != 200 {
			t.Fatalf("request %d: status %d: %s", i+1, w.Code, w.Body)
		}
	}
	w := get(apps[1], "/user/test")
	if w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("4th request on the other instance: status %d, Retry-After %q; want 429", w.Code, w.Header().Get("Retry-After"))
	}
	if w := get(apps[1], "/search"); w.Code != 200 {
		t.Fatalf("another route: status %d", w.Code)
	}
}

// The server the app runs bounds every stage of a connection.
func TestServerTimeouts(t *testing.T) { exampletest.CheckServer(t, newServer("", nil)) }
