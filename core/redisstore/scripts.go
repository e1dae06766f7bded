package redisstore

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
)

// The scripts are assembled from their templates (exact1.lua, ...) and fragments/*.lua when
// the package starts, so that every rule (when a rate has room, what a request records,
// what a decision reports, which rate is the tightest, when the expiry is renewed) is
// written once however many scripts use it. Redis runs one script per call, and a script
// cannot call another; within a script, a Lua function or closure costs the server more
// than the same code inline. So fragments are pasted in as text, in the manner of C macros:
//
//	--#include name          the line becomes fragments/name.lua, indented as the line is
//	--#define NAME text      from here on, $NAME becomes text
//	--#define NAME(a, b) t  $NAME(x, y) becomes t with $a and $b replaced by x and y
//
// A fragment is written against local names its caller provides, and leaves the steps that
// depend on a script's layout to definitions, so that one text serves every layout. A use
// of an undefined name, a definition nothing uses and a name defined twice are errors,
// which panic as the package starts; TestScriptsAssemble also wants every fragment used.
//
//go:embed *.lua fragments/*.lua
var luaFiles embed.FS

// The script sources, as sent to Redis.
var (
	exact1Src   = mustAssemble("exact1.lua")
	compact1Src = mustAssemble("compact1.lua")
	exactNSrc   = mustAssemble("exactn.lua")
	bounded1Src = mustAssemble("bounded1.lua")
	boundedNSrc = mustAssemble("boundedn.lua")
	decideSrc   = mustAssemble("decide.lua")
	releaseSrc  = mustAssemble("release.lua")
	resetSrc    = mustAssemble("reset.lua")
)

func mustAssemble(name string) string {
	src, _, err := assemble(luaFiles, name)
	if err != nil {
		panic("redisstore: assembling " + name + ": " + err.Error())
	}
	return src
}

var (
	directiveRE = regexp.MustCompile(`^(\s*)--#(\w+)\s*(.*?)\s*$`)
	defineRE    = regexp.MustCompile(`^([A-Za-z_]\w*)(\(([^)]*)\))?(?:\s+(.*))?$`)
	useRE       = regexp.MustCompile(`\$([A-Za-z_]\w*)`)
)

type macro struct {
	params []string // nil for a name without parameters
	body   string
	used   bool
}

type assembler struct {
	fsys     fs.FS
	macros   map[string]*macro
	included []string // fragments, in the order first included
	out      strings.Builder
}

// assemble returns the script built from the template name in fsys, and the fragments it
// included.
func assemble(fsys fs.FS, name string) (string, []string, error) {
	a := &assembler{fsys: fsys, macros: map[string]*macro{}}
	if err := a.file(name, "", 0); err != nil {
		return "", nil, err
	}
	for n, m := range a.macros {
		if !m.used {
			return "", nil, fmt.Errorf("%s: $%s is defined but never used", name, n)
		}
	}
	return a.out.String(), a.included, nil
}

func (a *assembler) file(name, indent string, depth int) error {
	if depth > 8 {
		return fmt.Errorf("%s: includes nested too deep", name)
	}
	text, err := fs.ReadFile(a.fsys, name)
	if err != nil {
		return err
	}
	for i, line := range strings.Split(strings.TrimSuffix(string(text), "\n"), "\n") {
		where := fmt.Sprintf("%s:%d", name, i+1)
		if m := directiveRE.FindStringSubmatch(line); m != nil {
			switch m[2] {
			case "include":
				if !slices.Contains(a.included, m[3]) {
					a.included = append(a.included, m[3])
				}
				if err := a.file(path.Join("fragments", m[3]+".lua"), indent+m[1], depth+1); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
			case "define":
				if err := a.define(m[3]); err != nil {
					return fmt.Errorf("%s: %w", where, err)
				}
			default:
				return fmt.Errorf("%s: unknown directive --#%s", where, m[2])
			}
			continue
		}
		line, err := a.expand(line, 0)
		if err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if strings.TrimSpace(line) != "" {
			a.out.WriteString(indent)
			a.out.WriteString(line)
		}
		a.out.WriteByte('\n')
	}
	return nil
}

func (a *assembler) define(def string) error {
	m := defineRE.FindStringSubmatch(def)
	if m == nil {
		return fmt.Errorf("malformed definition %q", def)
	}
	if _, dup := a.macros[m[1]]; dup {
		return fmt.Errorf("$%s defined twice", m[1])
	}
	mac := &macro{body: m[4]}
	if m[2] != "" {
		mac.params = []string{}
		for _, p := range strings.Split(m[3], ",") {
			if p = strings.TrimSpace(p); p != "" {
				mac.params = append(mac.params, p)
			}
		}
	}
	a.macros[m[1]] = mac
	return nil
}

// expand replaces every $NAME and $NAME(args) in s, then expands the result again, so that
// a definition can use another.
func (a *assembler) expand(s string, depth int) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	if depth > 8 {
		return "", fmt.Errorf("definitions nested too deep in %q", s)
	}
	var b strings.Builder
	for {
		loc := useRE.FindStringSubmatchIndex(s)
		if loc == nil {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:loc[0]])
		name := s[loc[2]:loc[3]]
		mac, ok := a.macros[name]
		if !ok {
			return "", fmt.Errorf("$%s is not defined", name)
		}
		mac.used = true
		s = s[loc[1]:]
		if mac.params == nil {
			b.WriteString(mac.body)
			continue
		}
		args, rest, err := splitArgs(s)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", name, err)
		}
		if len(args) != len(mac.params) {
			return "", fmt.Errorf("$%s takes %d arguments, given %d", name, len(mac.params), len(args))
		}
		b.WriteString(useRE.ReplaceAllStringFunc(mac.body, func(u string) string {
			if i := slices.Index(mac.params, u[1:]); i >= 0 {
				return args[i]
			}
			return u
		}))
		s = rest
	}
	return a.expand(b.String(), depth+1)
}

// splitArgs reads "(x, f(y, z))..." into its top-level arguments and what follows.
func splitArgs(s string) (args []string, rest string, err error) {
	if !strings.HasPrefix(s, "(") {
		return nil, "", fmt.Errorf("arguments missing")
	}
	depth, start := 0, 1
	for i, c := range s {
		switch c {
		case '(':
			depth++
		case ')':
			depth--
			if depth == 0 {
				if arg := strings.TrimSpace(s[start:i]); arg != "" || len(args) > 0 {
					args = append(args, arg)
				}
				return args, s[i+1:], nil
			}
		case ',':
			if depth == 1 {
				args = append(args, strings.TrimSpace(s[start:i]))
				start = i + 1
			}
		}
	}
	return nil, "", fmt.Errorf("unbalanced parentheses")
}
