package tools

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// pathTree builds a Location with symbolic links inside and out, a sibling
// directory outside it and a reference directory.
type pathTree struct {
	root, outside, lib string
	r                  *Resolver
}

func newPathTree(t testing.TB) *pathTree {
	t.Helper()
	base := t.TempDir()
	pt := &pathTree{root: filepath.Join(base, "loc"), outside: filepath.Join(base, "outside"), lib: filepath.Join(base, "lib")}
	files := map[string]string{
		"loc/a.txt":               "a\n",
		"loc/dir/b.txt":           "b\n",
		"loc/日本語/ファイル.txt":        "unicode\n",
		"loc/" + longName(255):    "long\n",
		"outside/secret.txt":      "secret\n",
		"lib/x.go":                "package x\n",
		"loc/@scoped/pkg.json":    "{}\n",
		"loc/dir/deeper/deep.txt": "deep\n",
	}
	for rel, content := range files {
		p := filepath.Join(base, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	links := map[string]string{
		"loc/link_in":       "dir",
		"loc/link_file_in":  "dir/b.txt",
		"loc/link_abs_in":   filepath.Join(pt.root, "dir"),
		"loc/link_out":      pt.outside,
		"loc/link_out_file": "../outside/secret.txt",
		"loc/dangling_out":  "/nonexistent-sessiond-test/x",
		"loc/dangling_in":   "missing.txt",
		"loc/dir/up":        "../..",
		"loc/chain1":        "chain2",
		"loc/chain2":        "link_in",
		"lib/back_to_loc":   "../loc",
	}
	for rel, target := range links {
		if err := os.Symlink(target, filepath.Join(base, filepath.FromSlash(rel))); err != nil {
			t.Fatal(err)
		}
	}
	r, err := NewResolver(pt.root, map[string]string{"lib": pt.lib})
	if err != nil {
		t.Fatal(err)
	}
	pt.r = r
	return pt
}

func longName(n int) string { return strings.Repeat("n", n-4) + ".txt" }

func TestResolve(t *testing.T) {
	pt := newPathTree(t)
	root := pt.r.Root()
	lib := pt.r.References()["lib"]
	deepPath := strings.Repeat("x/", 1500) + "f.txt" // longer than PATH_MAX, does not exist
	tests := []struct {
		name    string
		in      string
		wantErr error
		rel     string // expected Rel
		entry   string // expected Entry, when different from rel
		base    string // expected Base; root when empty
		exists  bool
	}{
		{name: "plain file", in: "a.txt", rel: "a.txt", exists: true},
		{name: "root itself", in: ".", rel: ".", exists: true},
		{name: "dot segments", in: "./dir/../a.txt", rel: "a.txt", exists: true},
		{name: "directory", in: "dir/", rel: "dir", exists: true},
		{name: "empty", in: "", wantErr: ErrInvalidPath},
		{name: "NUL byte", in: "a\x00b", wantErr: ErrInvalidPath},
		{name: "absolute", in: "/etc/passwd", wantErr: ErrAbsolutePath},
		{name: "absolute inside root", in: filepath.Join(root, "a.txt"), wantErr: ErrAbsolutePath},
		{name: "dotdot", in: "../outside/secret.txt", wantErr: ErrPathEscape},
		{name: "nested dotdot", in: "dir/../../outside", wantErr: ErrPathEscape},
		{name: "bare dotdot", in: "..", wantErr: ErrPathEscape},
		{name: "dotdot that stays inside", in: "dir/deeper/../b.txt", rel: "dir/b.txt", exists: true},
		{name: "symlink dir inside", in: "link_in/b.txt", rel: "dir/b.txt", entry: "dir/b.txt", exists: true},
		{name: "symlink file inside", in: "link_file_in", rel: "dir/b.txt", entry: "link_file_in", exists: true},
		{name: "absolute symlink inside", in: "link_abs_in/deeper/deep.txt", rel: "dir/deeper/deep.txt", exists: true},
		{name: "symlink chain inside", in: "chain1/b.txt", rel: "dir/b.txt", exists: true},
		{name: "symlink dir to outside", in: "link_out/secret.txt", wantErr: ErrSymlinkEscape},
		{name: "symlink file to outside", in: "link_out_file", wantErr: ErrSymlinkEscape},
		{name: "symlink to outside, missing file below", in: "link_out/new.txt", wantErr: ErrSymlinkEscape},
		{name: "dangling symlink to outside", in: "dangling_out", wantErr: ErrSymlinkEscape},
		{name: "dangling symlink inside", in: "dangling_in", wantErr: ErrInvalidPath},
		{name: "relative symlink climbing out", in: "dir/up/outside/secret.txt", wantErr: ErrSymlinkEscape},
		{name: "unicode names", in: "日本語/ファイル.txt", rel: "日本語/ファイル.txt", exists: true},
		{name: "new unicode file", in: "日本語/新しい.txt", rel: "日本語/新しい.txt"},
		{name: "missing file", in: "new/dir/file.txt", rel: "new/dir/file.txt"},
		{name: "missing file under symlink", in: "link_in/new.txt", rel: "dir/new.txt"},
		{name: "255-byte name", in: longName(255), rel: longName(255), exists: true},
		{name: "256-byte name", in: longName(256), wantErr: ErrInvalidPath},
		{name: "256-byte directory name", in: longName(256) + "/x", wantErr: ErrInvalidPath},
		{name: "very long missing path", in: deepPath, rel: deepPath},
		{name: "file used as directory", in: "a.txt/x", wantErr: ErrNotDirectory},
		{name: "reference file", in: "@lib/x.go", rel: "x.go", base: lib, exists: true},
		{name: "reference root", in: "@lib", rel: ".", base: lib, exists: true},
		{name: "reference escape", in: "@lib/../loc/a.txt", wantErr: ErrPathEscape},
		{name: "reference symlink back into the Location", in: "@lib/back_to_loc/a.txt", wantErr: ErrSymlinkEscape},
		{name: "reference absolute tail", in: "@lib//etc/passwd", wantErr: ErrAbsolutePath},
		{name: "unknown reference", in: "@nope/x", wantErr: ErrUnknownReference},
		{name: "at-directory that exists", in: "@scoped/pkg.json", rel: "@scoped/pkg.json", exists: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pt.r.Resolve(tc.in)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Resolve(%q) = %+v, %v; want %v", tc.in, got, err, tc.wantErr)
				}
				var pe *PathError
				if !errors.As(err, &pe) || pe.Path != tc.in {
					t.Fatalf("error %v is not a *PathError naming the input", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", tc.in, err)
			}
			base := tc.base
			if base == "" {
				base = root
			}
			entry := tc.entry
			if entry == "" {
				entry = tc.rel
			}
			if got.Rel != tc.rel || got.Base != base || got.Exists != tc.exists || got.Entry != entry {
				t.Fatalf("Resolve(%q) = %+v; want rel %q entry %q base %q exists %v", tc.in, got, tc.rel, entry, base, tc.exists)
			}
			if got.Path != filepath.Join(base, filepath.FromSlash(tc.rel)) {
				t.Fatalf("Path %q does not match Base+Rel", got.Path)
			}
			if got.Exists {
				if canon, err := filepath.EvalSymlinks(got.Path); err != nil || canon != got.Path {
					t.Fatalf("Path %q is not canonical (EvalSymlinks = %q, %v)", got.Path, canon, err)
				}
			}
		})
	}
}

func TestWorkdir(t *testing.T) {
	pt := newPathTree(t)
	root := pt.r.Root()
	outside, _ := filepath.EvalSymlinks(pt.outside)
	tests := []struct {
		in      string
		want    string
		inside  bool
		wantErr error
	}{
		{in: "", want: root, inside: true},
		{in: "dir", want: filepath.Join(root, "dir"), inside: true},
		{in: "link_in", want: filepath.Join(root, "dir"), inside: true},
		{in: filepath.Join(root, "dir"), want: filepath.Join(root, "dir"), inside: true},
		{in: "../outside", want: outside},
		{in: "link_out", want: outside},
		{in: pt.outside, want: outside},
		{in: "@lib", want: pt.r.References()["lib"]},
		{in: "a.txt", wantErr: ErrNotDirectory},
		{in: "missing", wantErr: ErrInvalidPath},
		{in: "@nope", wantErr: ErrUnknownReference},
	}
	for _, tc := range tests {
		got, err := pt.r.Workdir(tc.in)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Workdir(%q) = %q, %v; want %v", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || got != tc.want || pt.r.Contains(got) != tc.inside {
			t.Errorf("Workdir(%q) = %q, %v (inside %v); want %q inside %v", tc.in, got, err, pt.r.Contains(got), tc.want, tc.inside)
		}
	}
}

func FuzzResolvePath(f *testing.F) {
	for _, seed := range []string{
		"a.txt", ".", "..", "../x", "/etc/passwd", "dir/../../x", "link_out/secret.txt", "link_in/b.txt",
		"dir/up/outside", "@lib/x.go", "@lib/../x", "@nope", "日本語/ファイル.txt", "a.txt/x", "dangling_out",
		"chain1/../a.txt", "@lib/back_to_loc/a.txt", strings.Repeat("a/", 100), "a\x00", "./././a.txt",
	} {
		f.Add(seed)
	}
	pt := newPathTree(f)
	root := pt.r.Root()
	lib := pt.r.References()["lib"]
	f.Fuzz(func(t *testing.T, p string) {
		res, err := pt.r.Resolve(p)
		// ResolveEntry differs only in a final link, which it never
		// refuses: it names the link, in a canonical directory.
		ent, eerr := pt.r.ResolveEntry(p)
		switch {
		case eerr != nil:
			if err == nil {
				t.Fatalf("ResolveEntry(%q) refused what Resolve took: %v", p, eerr)
			}
			if !errors.As(eerr, new(*PathError)) {
				t.Fatalf("ResolveEntry(%q) error %v is not a *PathError", p, eerr)
			}
		case ent.Rel != ent.Entry || !within(ent.Base, ent.Path) || ent.Path != filepath.Join(ent.Base, filepath.FromSlash(ent.Rel)):
			t.Fatalf("ResolveEntry(%q) = %+v", p, ent)
		case ent.Exists && ent.Path != ent.Base:
			if dir, err := filepath.EvalSymlinks(filepath.Dir(ent.Path)); err != nil || dir != filepath.Dir(ent.Path) {
				t.Fatalf("ResolveEntry(%q) = %q, in a directory EvalSymlinks gives as %q, %v", p, ent.Path, dir, err)
			}
		}
		if err == nil && eerr == nil && ent.Entry != res.Entry {
			t.Fatalf("Resolve(%q) entry %q, ResolveEntry's %q", p, res.Entry, ent.Entry)
		}
		if err != nil {
			var pe *PathError
			if !errors.As(err, &pe) {
				t.Fatalf("Resolve(%q) error %v is not a *PathError", p, err)
			}
			return
		}
		if res.Base != root && res.Base != lib {
			t.Fatalf("Resolve(%q) base %q is neither the root nor a reference", p, res.Base)
		}
		if !within(res.Base, res.Path) {
			t.Fatalf("Resolve(%q) = %q escapes %q", p, res.Path, res.Base)
		}
		if res.Rel == ".." || strings.HasPrefix(res.Rel, "../") || filepath.IsAbs(res.Rel) {
			t.Fatalf("Resolve(%q) rel %q", p, res.Rel)
		}
		if res.Exists {
			canon, err := filepath.EvalSymlinks(res.Path)
			if err != nil || canon != res.Path {
				t.Fatalf("Resolve(%q) = %q, but EvalSymlinks gives %q, %v", p, res.Path, canon, err)
			}
		}
		// Everything that exists under a resolved path's parent chain is
		// inside the base once symlinks are followed.
		if canon, err := filepath.EvalSymlinks(filepath.Join(res.Base, filepath.FromSlash(res.Entry))); err == nil && !within(res.Base, canon) {
			t.Fatalf("Resolve(%q) entry %q leads to %q outside %q", p, res.Entry, canon, res.Base)
		}
	})
}

// TestResolveEntry: ResolveEntry follows links on the way to the final
// name, as Resolve does, but names a link in the final name itself, to a
// missing target or one outside the root alike.
func TestResolveEntry(t *testing.T) {
	pt := newPathTree(t)
	root := pt.r.Root()
	for _, tc := range []struct {
		in, rel string
		wantErr error
	}{
		{in: "a.txt", rel: "a.txt"},
		{in: ".", rel: "."},
		{in: "link_file_in", rel: "link_file_in"},
		{in: "link_in", rel: "link_in"},
		{in: "link_in/b.txt", rel: "dir/b.txt"},        // a link on the way is followed
		{in: "chain1", rel: "chain1"},                  // not the chain's target
		{in: "dangling_in", rel: "dangling_in"},        // to a missing target
		{in: "dangling_out", rel: "dangling_out"},      // to a missing target outside
		{in: "link_out_file", rel: "link_out_file"},    // to a file outside
		{in: "dir/up", rel: "dir/up"},                  // to a directory above the root
		{in: "dangling_in/x", wantErr: ErrInvalidPath}, // a missing target on the way
		{in: "link_out/secret.txt", wantErr: ErrSymlinkEscape},
		{in: "../a.txt", wantErr: ErrPathEscape},
	} {
		res, err := pt.r.ResolveEntry(tc.in)
		if tc.wantErr != nil {
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("%s: %+v, %v; want %v", tc.in, res, err, tc.wantErr)
			}
			continue
		}
		want := filepath.Join(root, filepath.FromSlash(tc.rel))
		if err != nil || res.Rel != tc.rel || res.Entry != tc.rel || res.Path != want || !res.Exists || res.Base != root {
			t.Errorf("%s: %+v, %v; want rel and entry %q, path %s", tc.in, res, err, tc.rel, want)
		}
	}
	// A missing name is not there, as with Resolve.
	if res, err := pt.r.ResolveEntry("dir/new.txt"); err != nil || res.Exists || res.Rel != "dir/new.txt" {
		t.Errorf("missing: %+v, %v", res, err)
	}
}
