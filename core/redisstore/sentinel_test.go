package redisstore_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core"
	"github.com/reqlimit/reqlimit/core/redisstore"
	"github.com/reqlimit/reqlimit/internal/redistest"
)

// TestSentinel runs decisions through a Sentinel failover client, built as a
// UniversalClient the way applications usually build it.
func TestSentinel(t *testing.T) {
	needRedis(t)
	master := ownServer(t)
	port, err := redistest.FreePort(false)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	conf := filepath.Join(dir, "sentinel.conf")
	text := "port " + strconv.Itoa(port) + "\nbind 127.0.0.1\ndir " + dir + "\n" +
		"sentinel monitor rl 127.0.0.1 " + strconv.Itoa(master.Port) + " 1\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("redis-server", conf, "--sentinel")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := "127.0.0.1:" + strconv.Itoa(port)
	sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
	defer sc.Close()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if a, err := sc.GetMasterAddrByName(ctx, "rl").Result(); err == nil && len(a) == 2 && a[1] == strconv.Itoa(master.Port) {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("sentinel does not know the master: %v %v", a, err)
		}
	}
	c := redis.NewUniversalClient(&redis.UniversalOptions{MasterName: "rl", Addrs: []string{addr}})
	defer c.Close()
	if _, ok := c.(*redis.Client); !ok {
		t.Fatalf("UniversalClient with MasterName is %T, want the failover *redis.Client", c)
	}
	s := redisstore.New(c, roomy)
	q := core.Query{Policy: core.MustParsePolicy("2/1h"), Key: "k"}
	for i, want := range []bool{true, true, false} {
		d, err := s.Decide(ctx, q)
		if err != nil || d.Allowed != want {
			t.Fatalf("request %d through Sentinel: %+v %v, want allowed=%v", i+1, d, err, want)
		}
	}
}
