// Package repotest holds checks on the repository's own facts that the test command can
// afford: every exported name is documented, and the docs' trusted-proxy recipes are the
// code their tests run. The checks that run the go tool over the repository (gofmt, go vet,
// staticcheck, 32-bit builds, building the recipes alone) are .ci/run's.
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

// maintainerCheck skips a check that builds with the go tool, slow beside the test run,
// unless .ci/run asks for it.
func maintainerCheck(t *testing.T) {
	if os.Getenv("REQLIMIT_CI") == "" {
		t.Skip("a maintainers' check: .ci/run runs it (REQLIMIT_CI=1)")
	}
}
