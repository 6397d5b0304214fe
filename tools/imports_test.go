package tools

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImportDirection keeps tools below actors and beside persistence and
// locations (DESIGN.md §2): it may import the standard library, the
// JSON-schema validator, the shell parser, x/sys/unix (pidfds, which the
// standard library does not expose), goleak (tests), messages and its own
// sub-packages, and nothing else.
func TestImportDirection(t *testing.T) {
	allowed := []string{
		"github.com/santhosh-tekuri/jsonschema/v6",
		"mvdan.cc/sh/v3/syntax",
		"golang.org/x/sys/unix",
		"go.uber.org/goleak",
		"github.com/sessiond/sessiond/messages",
		"github.com/sessiond/sessiond/tools",
	}
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(p, "/")
			if !strings.Contains(first, ".") {
				continue // standard library
			}
			ok := false
			for _, a := range allowed {
				if p == a || strings.HasPrefix(p, a+"/") {
					ok = true
				}
			}
			if !ok {
				t.Errorf("%s imports %s, which tools may not depend on", path, p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked only %d files", checked)
	}
}
