package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/reqlimit/reqlimit/core/redisstore"
)

// TestScriptsLoad has Redis compile every script: broken Lua fails here by name rather than
// as a NOSCRIPT loop or a failed decision.
func TestScriptsLoad(t *testing.T) {
	needRedis(t)
	c := newClient(t, standalone)
	for name, src := range redisstore.ScriptSources() {
		sha, err := c.ScriptLoad(context.Background(), src).Result()
		if err != nil {
			t.Errorf("%s: SCRIPT LOAD: %v", name, err)
			continue
		}
		if want := redis.NewScript(src).Hash(); sha != want {
			t.Errorf("%s: Redis names it %s, the store %s", name, sha, want)
		}
	}
}
