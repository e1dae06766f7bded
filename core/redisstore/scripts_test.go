package redisstore

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// Each script's rules, as the fragments that state them.
var (
	exactRules   = []string{"ring_read", "ring_clamp", "exact_decide", "recorded", "exact_record", "exact_report", "ring_write"}
	boundedRules = []string{"bounded_drop", "bounded_decide", "recorded", "bounded_record", "bounded_report", "bounded_counts"}
	common       = []string{"prelude", "clock"}
	scriptRules  = map[string][][]string{
		"exact1.lua":   {common, exactRules, {"ring_bound", "exact_expiry"}},
		"exactn.lua":   {common, exactRules, {"ring_bound", "exact_expiry", "tightest"}},
		"bounded1.lua": {common, boundedRules, {"bounded_keep", "bounded_write"}},
		"boundedn.lua": {common, boundedRules, {"bounded_keep", "bounded_write", "tightest"}},
		"decide.lua":   {common, exactRules, boundedRules, {"tightest"}},
		"release.lua":  {{"prelude", "layout"}},
		"reset.lua":    {{"prelude", "layout"}},
	}
)

// TestScriptsAssemble: every script assembles, with nothing left to expand, from the
// fragments that state its rules; and every fragment serves some script.
func TestScriptsAssemble(t *testing.T) {
	used := map[string]bool{}
	for name, groups := range scriptRules {
		src, included, err := assemble(luaFiles, name)
		if err != nil {
			t.Fatal(err)
		}
		if src != ScriptSources()[name] {
			t.Errorf("%s: the store does not send what it assembles", name)
		}
		for _, mark := range []string{"$", "--#"} {
			if i := strings.Index(src, mark); i >= 0 {
				t.Errorf("%s: left unexpanded: %q", name, src[i:min(len(src), i+40)])
			}
		}
		for _, g := range groups {
			for _, f := range g {
				if !slices.Contains(included, f) {
					t.Errorf("%s does not include fragments/%s.lua: it must not state that rule itself", name, f)
				}
			}
		}
		for _, f := range included {
			used[f] = true
		}
	}
	frags, err := fs.Glob(luaFiles, "fragments/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range frags {
		if name := strings.TrimSuffix(path.Base(f), ".lua"); !used[name] {
			t.Errorf("%s is included by no script", f)
		}
	}
}

// TestRulesStatedOnce: the text that states a rule is in a fragment and in no template,
// so a script cannot drift from the others by keeping a private copy of one. Each entry is
// a piece of a rule's statement, as the fragments write it.
func TestRulesStatedOnce(t *testing.T) {
	rules := []string{
		"N - cost + 1",                         // an exact rate's room and wait
		"mode == 1 or (allowed and mode == 0)", // what is recorded
		"ov = n + cost - L",                    // what a grant overwrites
		"if used > N then used = N end",        // an exact rate's Remaining
		"floor((now - T) / g)",                 // a bounded rate's window
		"lo2 - lo >= NB",                       // dropping every bucket
		"sum + cost > N",                       // a bounded rate's room
		"rk = floor(now / g)",                  // the bucket a grant goes to
		"if add > cost then add = cost end",    // a bucket's cap
		"(newest + 1) * g + T - now",           // a bounded rate's reset and wait
		"tighter",                              // the tightest rate
		"E < $KEYNOW + ttl * 1000",             // an exact key's expiry renewal
		"E < keep",                             // a bounded key's expiry renewal
		"math.ceil((E - tnow) / 1000) + 1",     // an expiry counted from TIME
	}
	templates, err := fs.Glob(luaFiles, "*.lua")
	if err != nil {
		t.Fatal(err)
	}
	frags, err := fs.Glob(luaFiles, "fragments/*.lua")
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := fs.ReadFile(luaFiles, name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, rule := range rules {
		for _, name := range templates {
			if strings.Contains(read(name), rule) {
				t.Errorf("%s states a rule itself (%q): it belongs in a fragment", name, rule)
			}
		}
		found := false
		for _, name := range frags {
			found = found || strings.Contains(read(name), rule)
		}
		if !found {
			t.Errorf("no fragment states %q: update this test with the rule's new text", rule)
		}
	}
}

func TestAssembler(t *testing.T) {
	files := fstest.MapFS{
		"ok.lua":             {Data: []byte("--#define TWICE(x) ($x + $x)\n--#define N 3\nlocal a = $TWICE(f(1, $N))\nif a then\n  --#include body\nend\n")},
		"fragments/body.lua": {Data: []byte("-- says why\nreturn a\n\n")},
	}
	src, included, err := assemble(files, "ok.lua")
	if err != nil {
		t.Fatal(err)
	}
	if want := "local a = (f(1, 3) + f(1, 3))\nif a then\n  -- says why\n  return a\n\nend\n"; src != want {
		t.Errorf("assembled\n%s\nwant\n%s", src, want)
	}
	if !slices.Equal(included, []string{"body"}) {
		t.Errorf("included %v", included)
	}
	for text, want := range map[string]string{
		"local a = $X\n":                             "$X is not defined",
		"--#define X 1\nlocal a = 2\n":               "$X is defined but never used",
		"--#define X 1\n--#define X 2\nlocal a = $X": "$X defined twice",
		"--#define F(a) $a\nlocal b = $F(1, 2)\n":    "$F takes 1 arguments, given 2",
		"--#define F(a) $a\nlocal b = $F(1\n":        "$F: unbalanced parentheses",
		"--#include missing\n":                       "fragments/missing.lua",
		"--#if X\n":                                  "unknown directive --#if",
	} {
		_, _, err := assemble(fstest.MapFS{"bad.lua": {Data: []byte(text)}}, "bad.lua")
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one that says %q", text, err, want)
		}
	}
}
