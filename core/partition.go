package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// WithPartitionKey adds the draft's pk, telling a client's quotas apart, to each
// RateLimit-Policy member and to the RateLimit member: 12 bytes of an HMAC-SHA256 of its
// key, never the key. secret must be 16 random bytes or more, the same in every instance.
func WithPartitionKey(secret string) Option {
	return func(c *config) error {
		if len(secret) < 16 {
			return fmt.Errorf("WithPartitionKey: a secret of %d bytes; use at least 16 random bytes, the same in every instance", len(secret))
		}
		c.pkSecret = []byte(secret)
		return nil
	}
}

// setPartitioned sets the RateLimit fields with key's pk (a Structured Field byte sequence)
// in each member, adding to those of other limits on the request as setMembers does.
func (l *limiter) setPartitioned(h hook.HeaderSetter, d *Decision, key string) {
	names, lines := l.rateNames, []string(nil)
	a, adds := h.(hook.HeaderAdder)
	if adds {
		lines = a.Values(hook.HeaderRateLimitPolicy)
		names, _ = l.freeNames(lines)
	}
	mac := hmac.New(sha256.New, l.cfg.pkSecret)
	mac.Write([]byte(key))
	pk := ";pk=:" + base64.StdEncoding.EncodeToString(mac.Sum(nil)[:12]) + ":"
	policy, field := formatPolicy(names, l.policy.rates, pk), l.rateLimitField(d, names)+pk
	if len(lines) > 0 {
		a.Add(hook.HeaderRateLimitPolicy, policy)
		a.Add(hook.HeaderRateLimit, field)
		return
	}
	h.Set(hook.HeaderRateLimitPolicy, policy)
	h.Set(hook.HeaderRateLimit, field)
}
