package core

import (
	"bufio"
	"os"
	"strings"
)

// sourceLine returns line n of file, trimmed, or "" when the source is not at hand (as in
// most deployed binaries). It only runs when a registration panics.
func sourceLine(file string, n int) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for i := 1; sc.Scan(); i++ {
		if i == n {
			return strings.TrimSpace(sc.Text())
		}
	}
	return ""
}
