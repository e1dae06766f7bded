package repotest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// recipeSections hold the trusted-proxy recipes: a client-IP recipe that is wrong lets
// clients pick their own bucket, so every Go snippet in them must be run by a test.
var recipeSections = []struct {
	file, heading string
	adapters      bool // a recipe for every adapter is required
}{
	{"docs/operations.md", "## Client IPs and trusted proxies", true},
}

// recipeTests run the recipes against forged headers, each in its adapter's package.
var recipeTests = []string{"ginlimit/recipes_test.go", "echolimit/recipes_test.go", "echolimit/v5/recipes_test.go",
	"fiberlimit/recipes_test.go", "fiberlimit/v3/recipes_test.go", "nethttp/recipes_test.go"}

type snippet struct {
	where string // file:line of the opening fence
	src   string
}

// file is the snippet as a Go file whose positions, through a line directive, are those of
// the docs, so that parse and compile errors point into them.
func (s snippet) file() string {
	return "package recipe\n\n//line " + s.where + "\n\n" + s.src
}

// recipeSnippets returns the Go snippets of the recipe sections, and the adapters whose
// recipes a section must show.
func recipeSnippets(t *testing.T, root string) (snippets []snippet, required map[string][]string) {
	required = map[string][]string{}
	for _, sec := range recipeSections {
		data, err := os.ReadFile(filepath.Join(root, sec.file))
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		in, found, fence := false, false, -1
		var code []string
		for i, line := range lines {
			switch {
			case line == sec.heading:
				in, found = true, true
			case in && strings.HasPrefix(line, "## "):
				in = false
			case in && fence < 0 && strings.TrimSpace(line) == "```go":
				fence, code = i, nil
			case fence >= 0 && strings.TrimSpace(line) == "```":
				snippets = append(snippets, snippet{fmt.Sprintf("%s:%d", sec.file, fence+1), strings.Join(code, "\n") + "\n"})
				fence = -1
			case fence >= 0:
				code = append(code, line)
			}
		}
		if !found {
			t.Fatalf("%s: no %q section; update recipeSections if it moved", sec.file, sec.heading)
		}
		if sec.adapters {
			required[sec.file] = []string{"ginlimit", "echolimit", "echolimit/v5", "fiberlimit", "fiberlimit/v3", "nethttp"}
		}
	}
	return snippets, required
}

// TestProxyRecipesAreTested holds the docs' trusted-proxy recipes and their tests in step:
// every declaration of every recipe must appear, whitespace aside, in one of recipeTests,
// with the imports the recipe lists. A recipe edited in the docs alone fails here.
func TestProxyRecipesAreTested(t *testing.T) {
	root := root(t)
	type testFile struct {
		name, text string
		imports    map[string]bool
	}
	var tests []testFile
	for _, name := range recipeTests {
		data, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, data, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		tf := testFile{name: name, text: squash(string(data)), imports: map[string]bool{}}
		for _, imp := range f.Imports {
			tf.imports[importSpec(imp)] = true
		}
		tests = append(tests, tf)
	}

	snippets, required := recipeSnippets(t, root)
	shown := map[string]map[string]bool{} // doc file: adapter packages its recipes import
	for _, s := range snippets {
		src := s.file()
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "recipe.go", src, parser.ParseComments)
		if err != nil {
			t.Errorf("a recipe must be whole, imports then declarations, to be tested and copied: %v", err)
			continue
		}
		plain := "package recipe\n\n" + s.src
		if formatted, err := format.Source([]byte(plain)); err == nil && !bytes.Equal(formatted, []byte(plain)) {
			t.Errorf("%s: recipe is not gofmt-ed; as gofmt prints it:\n%s", s.where, formatted)
		}
		doc := strings.SplitN(s.where, ":", 2)[0]
		if shown[doc] == nil {
			shown[doc] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			shown[doc][strings.TrimPrefix(p, "github.com/reqlimit/reqlimit/")] = true
		}
		homes := map[string]*testFile{}
		for _, decl := range f.Decls {
			if g, ok := decl.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
				continue
			}
			start := decl.Pos()
			if d := declDoc(decl); d != nil {
				start = d.Pos()
			}
			text := src[fset.PositionFor(start, false).Offset:fset.PositionFor(decl.End(), false).Offset]
			var home *testFile
			for i := range tests {
				if strings.Contains(tests[i].text, squash(text)) {
					home = &tests[i]
					break
				}
			}
			if home == nil {
				t.Errorf("%s: this declaration is in none of %s; copy it there verbatim and test it:\n%s",
					s.where, strings.Join(recipeTests, ", "), text)
				continue
			}
			if fn, ok := decl.(*ast.FuncDecl); ok && strings.Count(home.text, fn.Name.Name+"(") < 2 {
				t.Errorf("%s: %s calls %s nowhere: a recipe copied there must also be run", s.where, home.name, fn.Name.Name)
			}
			homes[home.name] = home
		}
		for _, home := range homes {
			for _, imp := range f.Imports {
				if !home.imports[importSpec(imp)] {
					t.Errorf("%s: recipe imports %s, which %s, where its code is tested, does not", s.where, importSpec(imp), home.name)
				}
			}
		}
	}
	for doc, adapters := range required {
		for _, a := range adapters {
			if !shown[doc][a] {
				t.Errorf("%s: no trusted-proxy recipe imports %s", doc, a)
			}
		}
	}
}

// TestProxyRecipesCompile builds each recipe alone, as a reader would paste it: its
// imports must be exactly those it uses, and every helper it calls must be in it.
func TestProxyRecipesCompile(t *testing.T) {
	maintainerCheck(t)
	root := root(t)
	snippets, _ := recipeSnippets(t, root)
	dir := t.TempDir()
	overlay := map[string]string{}
	args := []string{"build", "-overlay", filepath.Join(dir, "overlay.json")}
	for i, s := range snippets {
		src := filepath.Join(dir, fmt.Sprintf("r%d.go", i))
		if err := os.WriteFile(src, []byte(s.file()), 0o644); err != nil {
			t.Fatal(err)
		}
		// Packages that exist only in the overlay: nothing is written to the repository.
		pkg := fmt.Sprintf("internal/repotest/recipecheck/r%d", i)
		overlay[filepath.Join(root, pkg, "recipe.go")] = src
		args = append(args, "./"+pkg)
	}
	js, err := json.Marshal(map[string]any{"Replace": overlay})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("recipes do not build on their own: %v\n%s", err, out)
	}
}

func declDoc(d ast.Decl) *ast.CommentGroup {
	switch d := d.(type) {
	case *ast.FuncDecl:
		return d.Doc
	case *ast.GenDecl:
		return d.Doc
	}
	return nil
}

func importSpec(imp *ast.ImportSpec) string {
	if imp.Name != nil {
		return imp.Name.Name + " " + imp.Path.Value
	}
	return imp.Path.Value
}

// squash collapses every run of white space to one space.
func squash(s string) string { return strings.Join(strings.Fields(s), " ") }
