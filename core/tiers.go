package core

import (
	"errors"
	"fmt"
	"sort"
)

// unlimited, as a tier's policy in WithTiers, lets the tier's requests through uncounted.
const unlimited = "unlimited"

// WithTiers chooses the policy for each request from a set declared here: pick names the
// request's tier (from a header, or a value an earlier middleware stored), and tiers maps
// each name to a policy in ParsePolicy's form, or to "unlimited", which lets the tier's
// requests through uncounted. A request whose tier is "" or not in tiers gets the limit's
// own policy, the one Limit or New declared: never no limit, unless a tier says so. Each
// tier counts in buckets of its own; the response fields and the observer's Event show the
// tier's policy.
//
//	ginlimit.Limit(100, time.Hour, core.WithTiers(func(r core.Request) string { return r.Header("X-Plan") },
//		map[string]string{"paid": "1000/1h", "internal": "unlimited"}))
//
// Every policy is parsed when the limit is registered; a bad one fails it, naming the tier.
// Options given with WithTiers apply to every tier, except WithRate, which adds to the
// limit's own policy only.
func WithTiers(pick func(Request) string, tiers map[string]string) Option {
	return func(c *config) error {
		if pick == nil || len(tiers) == 0 {
			return errors.New("WithTiers: want a function naming the request's tier and at least one tier")
		}
		names := make([]string, 0, len(tiers))
		for name := range tiers {
			names = append(names, name)
		}
		sort.Strings(names) // the first bad tier named is the same on every run
		parsed := make(map[string]*Policy, len(tiers))
		for _, name := range names {
			text := tiers[name]
			if name == "" {
				return fmt.Errorf("WithTiers: a tier named \"\" (%q); requests without a tier get the limit's own policy", text)
			}
			if text == unlimited {
				parsed[name] = nil
				continue
			}
			p, err := parsePolicy(text)
			if err != nil {
				return fmt.Errorf("WithTiers: tier %q: %w; or \"unlimited\"", name, err)
			}
			parsed[name] = p
		}
		c.tierPick, c.tierPolicies = pick, parsed
		return nil
	}
}

// buildTiers makes a limiter per tier with l's configuration and the tier's policy.
func (l *limiter) buildTiers() error {
	l.tiers = make(map[string]*limiter, len(l.cfg.tierPolicies))
	for name, p := range l.cfg.tierPolicies {
		if p == nil {
			l.tiers[name] = nil
			continue
		}
		cfg := l.cfg
		cfg.extraRates, cfg.quota, cfg.tierPick, cfg.tierPolicies = nil, nil, nil, nil
		t, err := construct(p.rates, cfg)
		if err != nil {
			return fmt.Errorf("WithTiers: tier %q: %w", name, err)
		}
		t.altNames, t.altPolicyField = t.names("#" + name)
		l.tiers[name] = t
	}
	return nil
}

// tier returns the limiter deciding r, and false when its tier is unlimited.
func (l *limiter) tier(r Request) (*limiter, bool) {
	if r == nil {
		return l, true
	}
	t, ok := l.tiers[l.cfg.tierPick(r)]
	switch {
	case !ok:
		return l, true
	case t == nil:
		return nil, false
	}
	return t, true
}
