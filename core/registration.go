package core

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path"
	"reflect"
	"runtime"
	"strconv"
	"strings"

	"github.com/reqlimit/reqlimit/internal/hook"
)

// A registrationSite is where a limit was registered: the application's frames that led to
// the call, innermost first, each as "function:line+offset".
type registrationSite struct {
	file  string // the innermost frame's file and line, for messages
	line  int
	stack []string
	fn    string // the library function the application called, such as "ginlimit.Limit"
}

// maxSiteFrames bounds how much of the caller's stack names a registration: enough to tell
// apart two limits registered through one helper, no more.
const maxSiteFrames = 8

// ownModule is this module's import path prefix. Programs (package main) are named
// "main." whatever their path, so they are never the library's own frames.
const ownModule = "github.com/reqlimit/reqlimit/"

// registration describes the call that is registering a limit: the frames outside this
// module's library packages, so that whichever adapter (or none) was called, the site is
// the application's line.
func registration() registrationSite {
	pcs := make([]uintptr, 48)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	var site registrationSite
	for more := true; more && len(site.stack) < maxSiteFrames; {
		var f runtime.Frame
		f, more = frames.Next()
		if site.stack == nil && isLibraryFrame(f.Function) {
			site.fn = strings.TrimPrefix(f.Function, ownModule) // the outermost one wins
		}
		// A frame without a function (foreign code) names nothing the same in every
		// process: its offset would be an address.
		if f.Function != "" && !isLibraryFrame(f.Function) && !strings.HasPrefix(f.Function, "runtime.") {
			if site.stack == nil {
				site.file, site.line = f.File, f.Line
			}
			// The call's offset in its function tells apart two calls on one line, and,
			// unlike the address, is the same in every process running the build.
			site.stack = append(site.stack, f.Function+":"+strconv.Itoa(f.Line)+"+"+strconv.FormatUint(uint64(f.PC-f.Entry), 16))
		}
	}
	return site
}

// isLibraryFrame reports whether fn belongs to one of this module's library packages (core,
// its stores, the adapters), not to a caller: an application, a test, a test helper package
// (named like httptest: storetest), or an application the repository ships (examples/...,
// grpclimit/example, docs/...).
func isLibraryFrame(fn string) bool {
	rest, ok := strings.CutPrefix(fn, ownModule)
	if !ok {
		return false
	}
	pkg, _, _ := strings.Cut(rest, ".") // "core", "internal/adaptertest", "ginlimit_test"
	app := strings.HasPrefix(pkg, "examples/") || strings.HasPrefix(pkg, "docs/") || strings.HasSuffix(pkg, "/example")
	return !app && !strings.HasSuffix(pkg, "test")
}

// where describes the site for messages: file:line and, when the source is at hand, the
// registering line itself, which names the route.
func (s registrationSite) where() string {
	if s.file == "" {
		return "at an unknown site"
	}
	site := fmt.Sprintf("at %s:%d", path.Base(s.file), s.line)
	if line := sourceLine(s.file, s.line); line != "" {
		site += " (" + line + ")"
	}
	return site
}

// sourceLine returns line n of file, trimmed, or "" when the source is not at hand (as in
// most deployed binaries). It only runs when a registration panics.
func sourceLine(file string, n int) string {
	b, err := os.ReadFile(file)
	lines := strings.Split(string(b), "\n")
	if err != nil || n < 1 || n > len(lines) {
		return ""
	}
	return strings.TrimSpace(lines[n-1])
}

// identify returns what sets apart the buckets of a limit registered at stack (its
// application frames, innermost first) from every other limit's of the same policy: a hash
// of the stack, the same in every process running the build. No counter or registration
// order enters it, so instances that register their limits in another order still share
// each limit's buckets on a shared store, and a rebuilt router gets the same buckets. Limits
// one loop or helper registers share a site: WithScope names them apart on one route.
func identify(stack []string) string {
	h := fnv.New64a()
	// Joined by newlines, as the stack was hashed before limits had idents: limits
	// registered then keep their buckets on a shared store.
	h.Write([]byte(strings.Join(stack, "\n")))
	return "\x00limit " + strconv.FormatUint(h.Sum64(), 16)
}

// errNoSite refuses a limit without WithScope on a store other than the memory store when
// no application frame registered it: it would share its buckets with any other such
// limit of its policy, on a store that other processes share.
var errNoSite = errors.New("no application frame registered this limit, so its buckets cannot be told apart from another such limit's of the same policy: name them with WithScope(name)")

// unusable refuses options that would otherwise be ignored without a word: a forwarded
// header without the proxies it is read from, a partition key in fields that carry none,
// and, for fn registering the limit (such as "ginlimit.Limit"), WithClientIPFromFramework
// where the framework has no client IP, or another adapter's option (a deny handler that
// would never answer).
func unusable(c *config, fn string) error {
	if c.forwardedHeader != "" && len(c.trusted) == 0 && !c.trustUnix {
		return fmt.Errorf("WithForwardedHeader(%q) without WithTrustedProxies: a forwarded header is read only from trusted proxies; name yours", c.forwardedHeader)
	}
	if c.pkSecret != nil && c.headers != HeadersStandard && c.headers != HeadersBoth {
		// WithHeaders has refused any other style.
		style := [...]string{HeadersLegacy: "HeadersLegacy", HeadersOff: "HeadersOff"}[c.headers]
		return fmt.Errorf("WithPartitionKey with WithHeaders(%s): pk is a parameter of the RateLimit-Policy field, which that style does not send; use HeadersStandard or HeadersBoth, or leave WithPartitionKey out", style)
	}
	if fn == "" {
		return nil
	}
	if c.frameworkIP && c.extensions[hook.NoFrameworkIPKey{}] != nil {
		return fmt.Errorf("WithClientIPFromFramework: %s has no framework client IP; name your proxies with WithTrustedProxies", fn)
	}
	slash := strings.LastIndexByte(fn, '/') + 1
	name, _, _ := strings.Cut(fn[slash:], ".")
	pkg := fn[:slash] + name // "echolimit/v5" of "echolimit/v5.Limit"
	for key := range c.extensions {
		from, ok := strings.CutPrefix(reflect.TypeOf(key).PkgPath(), ownModule)
		if ok && from != pkg && !strings.HasPrefix(from, "internal/") && (pkg != "chilimit" || from != "nethttp") { // chilimit's limits are nethttp's
			return fmt.Errorf("an option of package %s given to %s, which cannot apply it: use %s's own", from, fn, pkg)
		}
	}
	return nil
}
