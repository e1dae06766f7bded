package core

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
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

// partitionKey returns the pk parameter of key's members: a Structured Field byte sequence.
func (l *limiter) partitionKey(key string) string {
	mac := hmac.New(sha256.New, l.cfg.pkSecret)
	mac.Write([]byte(key))
	return ";pk=:" + base64.StdEncoding.EncodeToString(mac.Sum(nil)[:12]) + ":"
}
