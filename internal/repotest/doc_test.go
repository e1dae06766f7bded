package repotest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportedNamesAreDocumented holds the library's packages to their godoc: every
// exported type, function, method, constant and variable has a doc comment (a grouped
// declaration may document the group).
func TestExportedNamesAreDocumented(t *testing.T) {
	root := root(t)
	var missing []string
	packageDocs := map[string]bool{} // directory: some file has a package comment
	filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "docs" || rel == "examples" || rel == "internal" || strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return nil
		}
		dir := filepath.Dir(rel)
		packageDocs[dir] = packageDocs[dir] || f.Doc != nil
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Name.IsExported() && d.Doc == nil && exportedReceiver(d) {
					missing = append(missing, rel+": func "+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					for _, name := range specNames(spec) {
						if ast.IsExported(name) && d.Doc == nil && specDoc(spec) == nil {
							missing = append(missing, rel+": "+name)
						}
					}
				}
			}
		}
		return nil
	})
	for dir, ok := range packageDocs {
		if !ok {
			missing = append(missing, dir+": package comment")
		}
	}
	if len(missing) > 0 {
		t.Fatalf("exported names without a doc comment:\n%s", strings.Join(missing, "\n"))
	}
}

func exportedReceiver(d *ast.FuncDecl) bool {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return true
	}
	typ := d.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok {
		typ = idx.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

func specNames(spec ast.Spec) []string {
	switch s := spec.(type) {
	case *ast.TypeSpec:
		return []string{s.Name.Name}
	case *ast.ValueSpec:
		var names []string
		for _, n := range s.Names {
			names = append(names, n.Name)
		}
		return names
	}
	return nil
}

func specDoc(spec ast.Spec) *ast.CommentGroup {
	switch s := spec.(type) {
	case *ast.TypeSpec:
		return s.Doc
	case *ast.ValueSpec:
		if s.Doc != nil {
			return s.Doc
		}
		return s.Comment
	}
	return nil
}
