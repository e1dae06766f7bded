// Package repotest holds checks on the repository itself, so that the test command
// enforces them too: gofmt and go vet are clean.
package repotest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// root is the library module's directory. Not "go list -m": in the repository's
// workspace it lists every module.
func root(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env GOMOD: %q, %v", out, err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

func TestGofmt(t *testing.T) {
	out, err := exec.Command("gofmt", "-l", root(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("gofmt: %v\n%s", err, out)
	}
	if files := strings.TrimSpace(string(out)); files != "" {
		t.Fatalf("not gofmt-ed:\n%s", files)
	}
}

func TestVet(t *testing.T) {
	if testing.Short() {
		t.Skip("go vet takes a while")
	}
	cmd := exec.Command("go", "vet", "./...")
	cmd.Dir = root(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go vet: %v\n%s", err, out)
	}
}

// TestBuildsOn32BitPlatforms: the library and its tests compile where int is 32 bits
// (386, arm). Its largest count does not fit such an int, so it must be compared as int64
// (otherwise core does not build there at all), and tests take it as bounds.LargestInt.
func TestBuildsOn32BitPlatforms(t *testing.T) {
	if testing.Short() {
		t.Skip("a build for another platform takes a while")
	}
	for _, args := range [][]string{
		{"build", "-o", os.DevNull, "./core/...", "./nethttp"},
		// vet type-checks the tests too: they must build there, to be run there.
		{"vet", "./core/...", "./nethttp", "./internal/..."},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = root(t)
		cmd.Env = append(os.Environ(), "GOARCH=386", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("GOARCH=386 go %s: %v\n%s", args[0], err, out)
		}
	}
}
