package main

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/sessiond/sessiond"

// allowed lists, per top-level package tree, the trees of this module it may
// import (DESIGN.md §2). A tree may always import itself.
var allowed = map[string][]string{
	"messages":    {},
	"persistence": {"messages"},
	"tools":       {"messages"},
	"locations":   {"messages", "persistence", "tools"},
	"actors":      {"messages", "persistence", "tools", "locations"},
	"cmd":         {"messages", "persistence", "tools", "locations", "actors"},
}

// forbiddenExternal lists external imports a tree must not use: only actors
// (and cmd, which wires them) may touch protoactor.
var forbiddenExternal = map[string][]string{
	"messages":    {"github.com/asynkron/protoactor-go", "go.etcd.io/bbolt"},
	"persistence": {"github.com/asynkron/protoactor-go"},
	"tools":       {"github.com/asynkron/protoactor-go", "go.etcd.io/bbolt"},
	"locations":   {"github.com/asynkron/protoactor-go"},
}

// TestDependencyDirection parses the imports of every Go file in the module
// and fails on an arrow that points the wrong way.
func TestDependencyDirection(t *testing.T) {
	root := filepath.Join("..", "..")
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		tree := strings.Split(filepath.ToSlash(rel), "/")[0]
		rules, ok := allowed[tree]
		if !ok {
			t.Errorf("%s: Go code outside the top-level layout of DESIGN.md §2", rel)
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbiddenExternal[tree] {
				if strings.HasPrefix(p, bad) {
					t.Errorf("%s imports %s", rel, p)
				}
			}
			sub, ok := strings.CutPrefix(p, module+"/")
			if !ok {
				continue
			}
			dep := strings.Split(sub, "/")[0]
			if dep == tree {
				continue
			}
			permitted := false
			for _, a := range rules {
				permitted = permitted || a == dep
			}
			if !permitted {
				t.Errorf("%s (%s) imports %s: not allowed by DESIGN.md §2", rel, tree, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 10 {
		t.Fatalf("only %d files checked; is the walk rooted at the module?", checked)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatal(err)
	}
}

// TestEveryPackageHasDocGo: every directory with non-test Go code has a
// doc.go holding its package comment, so a package's documentation is
// found in one place.
func TestEveryPackageHasDocGo(t *testing.T) {
	root := filepath.Join("..", "..")
	code := map[string]bool{} // directory -> has doc.go
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		dir := filepath.Dir(path)
		code[dir] = code[dir] || d.Name() == "doc.go"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 10 {
		t.Fatalf("found %d packages: the walk missed the module", len(code))
	}
	for dir, ok := range code {
		if !ok {
			t.Errorf("%s has no doc.go", dir)
		}
	}
	for dir := range code {
		f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(dir, "doc.go"), nil, parser.PackageClauseOnly|parser.ParseComments)
		if err == nil && (f.Doc == nil || strings.TrimSpace(f.Doc.Text()) == "") {
			t.Errorf("%s/doc.go has no package comment", dir)
		}
	}
}
