package redisstore_test

import (
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// The tests run against real redis-server processes on loopback ports, started here: one
// standalone node and a 3-master cluster shared by the tests, plus throwaway nodes for the
// tests that stop, pause or flush a server.
var (
	noRedis    string // why there is no server, or ""
	standalone *server
	cluster    []*server
	tmpRoot    string
)

// childEnv marks a re-executed test binary acting as one process of the cross-process test.
const childEnv = "REQLIMIT_REDISSTORE_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childMain())
	}
	if os.Getenv(instanceEnv) != "" {
		os.Exit(instanceMain())
	}
	if why := redistest.Missing(); why != "" {
		if ci, ok := redistest.InCI(); ok {
			fmt.Fprintf(os.Stderr, "redisstore: %s, and CI=%q\n", why, ci)
			os.Exit(1)
		}
		noRedis = why + " (with CI set, a failure)"
		os.Exit(m.Run())
	}
	code := func() int {
		var err error
		tmpRoot, err = os.MkdirTemp("", "redisstore-test-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(tmpRoot)
		standalone, err = startServer(false)
		if err != nil {
			fmt.Fprintln(os.Stderr, "redisstore: standalone server:", err)
			return 1
		}
		defer standalone.Stop()
		cluster, err = startCluster(3)
		for _, s := range cluster {
			defer s.Stop()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "redisstore: cluster:", err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

// needRedis skips the test when no server could be started outside CI.
func needRedis(t *testing.T) {
	t.Helper()
	if noRedis != "" {
		t.Skip(noRedis)
	}
}

// server is a redis-server process of the tests, from internal/redistest.
type server = redistest.Server

func startServer(clustered bool) (*server, error) { return redistest.StartServer(tmpRoot, clustered) }

func startCluster(n int) ([]*server, error) { return redistest.StartCluster(tmpRoot, n) }

// signal sends sig to s, failing t if it cannot.
func signal(t *testing.T, s *server, sig syscall.Signal) {
	t.Helper()
	if err := s.Signal(sig); err != nil {
		t.Fatalf("signal %v to redis-server on port %d: %v", sig, s.Port, err)
	}
}

func clusterAddrs() []string { return redistest.Addrs(cluster) }

// newClient returns a standalone client closed at the end of the test. It keeps go-redis's
// defaults (ContextTimeoutEnabled off), the case the store's own deadline guard covers.
func newClient(t *testing.T, s *server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr()})
	t.Cleanup(func() { c.Close() })
	return c
}

// newClusterClient returns a cluster client with context deadlines on the socket.
func newClusterClient(t *testing.T) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}

// ownServer starts a standalone server for one test that disrupts it.
func ownServer(t *testing.T) *server {
	t.Helper()
	s, err := startServer(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// roomy is the deadline for tests that are not about deadlines: the test machine may be
// loaded, and a spurious timeout there would hide what the test checks.
var roomy = redisstore.WithTimeout(redistest.Timeout)

// newCtxClient returns a standalone client that applies context deadlines to its sockets.
func newCtxClient(t *testing.T, s *server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { c.Close() })
	return c
}
