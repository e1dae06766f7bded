// Command redis-cluster is a Gin application whose limits are shared by every instance
// through a Redis Cluster: run two instances on two ports and a client still gets 3
// requests a minute in all, not 3 from each. See README.md beside this file for the
// commands that start a local cluster.
//
//	go run ./examples/redis-cluster -addr 127.0.0.1:8080 -redis 127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002
package main

import (
	"flag"
	"log"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/ginlimit"
)

// newRouter builds the app on a store shared through rdb. A Redis outage must not become an
// outage of the app: each instance then enforces the limits on its own (FailLocal) until
// the cluster answers again. opts configure the store (its default deadline is 100 ms).
func newRouter(rdb redis.UniversalClient, opts ...redisstore.Option) *gin.Engine {
	store := redisstore.New(rdb, opts...)
	shared := []core.Option{core.WithStore(store), core.WithFailMode(core.FailLocal)}
	with := func(opts ...core.Option) []core.Option { return append(append([]core.Option(nil), shared...), opts...) }

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery())
	if err := r.SetTrustedProxies(nil); err != nil {
		panic(err)
	}
	hello := func(c *gin.Context) { c.String(http.StatusOK, "hello\n") }
	r.GET("/user/test", ginlimit.Limit(3, time.Minute, with()...), hello)
	r.GET("/search", ginlimit.Limit(5, time.Second, with(core.WithRate(20, time.Minute))...), hello)
	r.GET("/api/data", ginlimit.Limit(10, time.Minute, with(core.WithKey(token))...), hello)
	return r
}

// issued stands for the application's store of the API tokens it issued.
var issued = map[string]bool{"alice": true}

// token keys a request by its API token if the application issued it, any other request
// by the client's IP: keyed by whatever it sends, a client would make up a token for a
// fresh quota whenever its own ran out.
func token(r core.Request) (string, error) {
	if t := r.Header("X-API-Token"); issued[t] {
		return t, nil
	}
	return "", nil
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "listen address")
	nodes := flag.String("redis", "127.0.0.1:7000,127.0.0.1:7001,127.0.0.1:7002", "Redis Cluster nodes, comma-separated")
	flag.Parse()
	rdb := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 strings.Split(*nodes, ","),
		ContextTimeoutEnabled: true, // the store's per-call deadline then bounds the socket too
	})
	defer rdb.Close()
	srv := newServer(*addr, newRouter(rdb))
	log.Printf("listening on http://%s, limits shared through the cluster at %s", *addr, *nodes)
	log.Fatal(srv.ListenAndServe())
}

// newServer serves h on addr with a bound on each stage of a connection: a client that
// sends its request slowly, or idles on a kept-alive connection, would otherwise hold it
// as long as it likes, and a limit only sees a request once it is read.
func newServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
	}
}
