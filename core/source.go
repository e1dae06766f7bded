package core

import (
	"os"
	"strings"
)

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
