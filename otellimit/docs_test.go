package otellimit_test

import (
	"os"
	"strings"
	"testing"
)

// TestDocsShowTheExample holds docs/metrics.md's recipe to the Example, which compiles and
// runs: the "## OpenTelemetry" section's first Go block is the Example's text.
func TestDocsShowTheExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, section, found := strings.Cut(string(doc), "\n## OpenTelemetry\n")
	if !found {
		t.Fatal("docs/metrics.md has no \"## OpenTelemetry\" section")
	}
	_, block, found := strings.Cut(section, "```go\n")
	block, _, closed := strings.Cut(block, "```\n")
	if !found || !closed {
		t.Fatal("docs/metrics.md's OpenTelemetry section has no Go block")
	}
	if !strings.Contains(string(example), block) || !strings.Contains(block, "func Example()") {
		t.Errorf("docs/metrics.md's OpenTelemetry recipe is not the text of example_test.go's Example:\n%s", block)
	}
}
