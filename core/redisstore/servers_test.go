package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core/redisstore"
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
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "redisstore: redis-server not found and CI=true: install it (apt-get install -y redis-server)")
			os.Exit(1)
		}
		noRedis = "redis-server not found (set CI=true to make this a failure)"
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
		defer standalone.stop()
		cluster, err = startCluster(3)
		for _, s := range cluster {
			defer s.stop()
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

type server struct {
	port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// freePort finds a loopback port, and for cluster nodes also its bus port (+10000), free.
func freePort(withBus bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !withBus {
			return port, nil
		}
		if port+10000 > 65535 {
			continue
		}
		if b, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000)); err == nil {
			b.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port pair")
}

func startServer(clustered bool) (*server, error) {
	port, err := freePort(clustered)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(tmpRoot, strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "log"), "--daemonize", "no"}
	if clustered {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
	}
	s := &server{port: port, dir: dir, args: args}
	return s, s.start()
}

// start runs the server (again, on the same port) and waits until it answers PING.
func (s *server) start() error {
	s.cmd = exec.Command("redis-server", s.args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("redis-server on port %d: %w\n%s", s.port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and waits for it, so that its port is free again.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

func (s *server) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatalf("signal %v to redis-server on port %d: %v", sig, s.port, err)
	}
}

func startCluster(n int) ([]*server, error) {
	var nodes []*server
	args := []string{"--cluster", "create"}
	for range n {
		s, err := startServer(true)
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, s)
		args = append(args, s.addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return nodes, fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.addr()})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_assigned:16384") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return nodes, fmt.Errorf("cluster not ok on %s: %v %s", s.addr(), err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return nodes, nil
}

func clusterAddrs() []string {
	var a []string
	for _, s := range cluster {
		a = append(a, s.addr())
	}
	return a
}

// newClient returns a standalone client closed at the end of the test. It keeps go-redis's
// defaults (ContextTimeoutEnabled off), the case the store's own deadline guard covers.
func newClient(t *testing.T, s *server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr()})
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
	t.Cleanup(s.stop)
	return s
}

// roomy is the deadline for tests that are not about deadlines: the test machine may be
// loaded, and a spurious timeout there would hide what the test checks.
var roomy = redisstore.WithTimeout(2 * time.Second)
