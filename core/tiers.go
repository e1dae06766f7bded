package core

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// WithTiers picks each request's policy: pick names its tier (a value your authentication
// stored, never a header the client writes), and tiers maps names to policies in
// ParsePolicy's form, or to "unlimited", let through uncounted. A tier "" or not in tiers
// gets the limit's own policy. Each tier has buckets of its own; a bad policy fails
// registration, naming the tier. The other options apply to every tier, but WithRate only
// to the limit's own policy.
func WithTiers(pick func(Request) string, tiers map[string]string) Option {
	return func(c *config) error {
		if pick == nil || len(tiers) == 0 {
			return errors.New("WithTiers: want a function naming the request's tier and at least one tier")
		}
		parsed := make(map[string]*Policy, len(tiers))
		// In order: the first bad tier named is the same on every run.
		for _, name := range slices.Sorted(maps.Keys(tiers)) {
			text := tiers[name]
			if name == "" {
				return fmt.Errorf("WithTiers: a tier named \"\" (%q); requests without a tier get the limit's own policy", text)
			}
			if text == "unlimited" {
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
		t, err := construct(p.rates, true, "#"+name, cfg)
		if err != nil {
			return fmt.Errorf("WithTiers: tier %q: %w", name, err)
		}
		l.tiers[name] = t
	}
	return nil
}
