// Package redistest starts real redis-server processes on loopback ports for tests: a
// standalone node or a Redis Cluster. Tests that need one call Require first: without
// redis-server it skips the test, unless the environment variable CI is set (to anything),
// where a missing server is a failure.
package redistest

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
)

// Missing reports why no redis-server can be run here, or "" when one can.
func Missing() string {
	for _, bin := range []string{"redis-server", "redis-cli"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " not found (apt-get install -y redis-server)"
		}
	}
	return ""
}

// Require skips t when redis-server is missing, or fails it when CI is set.
func Require(t testing.TB) {
	t.Helper()
	if why := Missing(); why != "" {
		if ci, ok := InCI(); ok {
			t.Fatalf("%s, and CI=%q", why, ci)
		}
		t.Skip(why + " (with CI set, a failure)")
	}
}

// InCI returns the value of CI and whether it is set. Any value counts, "false" or empty
// included: CI systems spell it differently, and a skipped test there would pass unseen.
func InCI() (string, bool) { return os.LookupEnv("CI") }

// A Server is one redis-server process on 127.0.0.1.
type Server struct {
	Port int
	dir  string
	args []string
	cmd  *exec.Cmd
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// FreePort finds a loopback port, and with withBus also its cluster bus port (+10000), free.
func FreePort(withBus bool) (int, error) {
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

// StartServer starts a node in a directory under dir, without persistence; extra are
// more redis-server arguments, such as "--maxmemory", "1mb".
func StartServer(dir string, clustered bool, extra ...string) (*Server, error) {
	port, err := FreePort(clustered)
	if err != nil {
		return nil, err
	}
	dir = filepath.Join(dir, strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--logfile", filepath.Join(dir, "log"), "--daemonize", "no"}
	if clustered {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
	}
	args = append(args, extra...)
	s := &Server{Port: port, dir: dir, args: args}
	return s, s.Start()
}

// Start runs the server (again, on the same port) and waits until it answers PING.
func (s *Server) Start() error {
	s.cmd = exec.Command("redis-server", s.args...)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := s.cmd.Start(); err != nil {
		return err
	}
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := c.Ping(context.Background()).Err(); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("redis-server on port %d: %w\n%s", s.Port, err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop kills the server and waits for it, so that its port is free again.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Kill()
	s.cmd.Wait()
	s.cmd = nil
}

// Signal sends sig to the server process (SIGSTOP to pause it, SIGCONT to resume).
func (s *Server) Signal(sig syscall.Signal) error { return s.cmd.Process.Signal(sig) }

// StartCluster starts n clustered nodes under dir and joins them as n masters with
// redis-cli --cluster create, waiting until every slot is served.
func StartCluster(dir string, n int) ([]*Server, error) {
	var nodes []*Server
	args := []string{"--cluster", "create"}
	for range n {
		s, err := StartServer(dir, true)
		if err != nil {
			return nodes, err
		}
		nodes = append(nodes, s)
		args = append(args, s.Addr())
	}
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		return nodes, fmt.Errorf("redis-cli %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range nodes {
		c := redis.NewClient(&redis.Options{Addr: s.Addr()})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_assigned:16384") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				return nodes, fmt.Errorf("cluster not ok on %s: %v %s", s.Addr(), err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return nodes, nil
}

// Cluster starts a cluster of n masters for one test, stopped when it ends.
func Cluster(t testing.TB, n int) []*Server {
	t.Helper()
	Require(t)
	nodes, err := StartCluster(t.TempDir(), n)
	t.Cleanup(func() {
		for _, s := range nodes {
			s.Stop()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return nodes
}

// Addrs returns the servers' addresses.
func Addrs(servers []*Server) []string {
	var a []string
	for _, s := range servers {
		a = append(a, s.Addr())
	}
	return a
}
