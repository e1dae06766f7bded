// Package redistest starts real redis-server processes on loopback ports for tests: a
// standalone node or a Redis Cluster. Tests that need one call Require first: without
// redis-server it skips the test, unless the environment variable CI is set (to anything),
// where a missing server is a failure.
package redistest

import (
	"context"
	"errors"
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

// Timeout is the store deadline for tests that are not about deadlines: a store's default
// is made for production round trips, and a loaded test machine stalls past it, turning a
// decision the test counts on into a store failure that the fail mode then decides.
const Timeout = 10 * time.Second

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
	Port   int
	dir    string
	args   []string
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd has exited
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// FreePort finds a loopback port, and with withBus also its cluster bus port (+10000), free.
// Nothing holds them: another process may take one before a server binds it, which
// StartServer notices and answers with another port.
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

// errPortTaken is why a server exited before it answered: redis-server exits when it
// cannot bind its port.
var errPortTaken = errors.New("exited before it answered (its port taken?)")

// portAttempts bounds how many free ports StartServer tries.
const portAttempts = 5

// StartServer starts a node in a directory under dir, without persistence; extra are
// more redis-server arguments, such as "--maxmemory", "1mb".
func StartServer(dir string, clustered bool, extra ...string) (*Server, error) {
	return start(dir, clustered, func(port int, dir string) ([]string, error) {
		args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--dir", dir, "--logfile", filepath.Join(dir, "log"), "--daemonize", "no"}
		if clustered {
			args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"))
		}
		return append(args, extra...), nil
	})
}

// StartSentinel starts a Sentinel in a directory under dir that monitors the master at
// masterPort on 127.0.0.1 as "name", with a quorum of 1.
func StartSentinel(dir, name string, masterPort int) (*Server, error) {
	return start(dir, false, func(port int, dir string) ([]string, error) {
		conf := filepath.Join(dir, "sentinel.conf")
		text := "port " + strconv.Itoa(port) + "\nbind 127.0.0.1\ndir " + dir + "\nlogfile " + filepath.Join(dir, "log") + "\n" +
			"sentinel monitor " + name + " 127.0.0.1 " + strconv.Itoa(masterPort) + " 1\n"
		return []string{conf, "--sentinel"}, os.WriteFile(conf, []byte(text), 0o644)
	})
}

// start starts a server on a free port, with the arguments args returns for that port and
// a directory of its own under dir. Between FreePort and the server's bind another process
// (another test package's server, say) may take the port; the server then exits, and
// start tries another port.
func start(dir string, withBus bool, args func(port int, dir string) ([]string, error)) (*Server, error) {
	var s *Server
	var err error
	for range portAttempts {
		var port int
		if port, err = FreePort(withBus); err != nil {
			return nil, err
		}
		s = &Server{Port: port, dir: filepath.Join(dir, strconv.Itoa(port))}
		if err = os.MkdirAll(s.dir, 0o755); err != nil {
			return nil, err
		}
		if s.args, err = args(port, s.dir); err != nil {
			return nil, err
		}
		if err = s.Start(); !errors.Is(err, errPortTaken) {
			return s, err
		}
	}
	return s, err
}

// Start runs the server (again, on the same port) and waits until it answers, with its own
// process ID: a server of another test package may hold the port, and answer in its
// place while this one fails to bind it and exits. On failure nothing is left running.
func (s *Server) Start() error {
	cmd := exec.Command("redis-server", s.args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	s.cmd, s.exited = cmd, exited
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.Info(context.Background(), "server").Result()
		if err == nil && strings.Contains(info, "\nprocess_id:"+strconv.Itoa(cmd.Process.Pid)+"\r\n") {
			return nil
		}
		select {
		case <-exited:
			s.cmd = nil
			log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
			return fmt.Errorf("redis-server on port %d %w\n%s", s.Port, errPortTaken, log)
		default:
		}
		if err == nil {
			err = errors.New("another process answers on the port")
		}
		if time.Now().After(deadline) {
			s.Stop()
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
	<-s.exited
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
