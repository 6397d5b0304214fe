package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

var update = flag.Bool("update", false, "rewrite the expected results of golden files")

// archive is a txtar-style golden case: a comment, then sections headed
// "-- name attr... --". Attributes transform a section's text into file
// bytes: crlf turns every "\n" into "\r\n", noeol drops the final line
// ending, quoted reads the text as one Go string literal.
type archive struct {
	comment  string
	sections []section
}

type section struct {
	name  string
	attrs []string
	text  string
}

func (s section) has(attr string) bool { return slices.Contains(s.attrs, attr) }

// bytes returns the file content the section describes.
func (s section) bytes(t *testing.T) []byte {
	t.Helper()
	text := s.text
	if s.has("quoted") {
		v, err := strconv.Unquote(strings.TrimSpace(text))
		if err != nil {
			t.Fatalf("section %s: %v", s.name, err)
		}
		return []byte(v)
	}
	if s.has("noeol") {
		text = strings.TrimSuffix(text, "\n")
	}
	if s.has("crlf") {
		text = strings.ReplaceAll(text, "\n", "\r\n")
	}
	return []byte(text)
}

// sectionFor renders file content as a section, choosing attributes.
func sectionFor(name string, data []byte) section {
	s := string(data)
	lf := strings.ReplaceAll(s, "\r\n", "\n")
	var attrs []string
	switch {
	case strings.Contains(lf, "\r") || (lf != s && strings.Count(s, "\r\n") != strings.Count(s, "\n")):
		return section{name: name, attrs: []string{"quoted"}, text: strconv.Quote(s) + "\n"}
	case lf != s:
		attrs = append(attrs, "crlf")
	}
	if lf != "" && !strings.HasSuffix(lf, "\n") {
		attrs = append(attrs, "noeol")
		lf += "\n"
	}
	return section{name: name, attrs: attrs, text: lf}
}

func parseArchive(data string) archive {
	var a archive
	var cur *section
	var comment strings.Builder
	for _, line := range strings.SplitAfter(data, "\n") {
		trimmed := strings.TrimSuffix(line, "\n")
		if strings.HasPrefix(trimmed, "-- ") && strings.HasSuffix(trimmed, " --") && len(trimmed) > 6 {
			fields := strings.Fields(trimmed[3 : len(trimmed)-3])
			a.sections = append(a.sections, section{name: fields[0], attrs: fields[1:]})
			cur = &a.sections[len(a.sections)-1]
			continue
		}
		if cur == nil {
			comment.WriteString(line)
		} else {
			cur.text += line
		}
	}
	a.comment = comment.String()
	return a
}

func (a archive) format() string {
	var b strings.Builder
	b.WriteString(a.comment)
	for _, s := range a.sections {
		b.WriteString("-- " + strings.Join(append([]string{s.name}, s.attrs...), " ") + " --\n")
		b.WriteString(s.text)
	}
	return b.String()
}

func (a archive) get(name string) (section, bool) {
	for _, s := range a.sections {
		if s.name == name {
			return s, true
		}
	}
	return section{}, false
}

// goldenArgs are optional settings of a case.
type goldenArgs struct {
	// Fail makes the file operation Op ("create", "replace" or "remove") on
	// Path fail, to exercise partial application.
	Fail *struct {
		Op   string `json:"op"`
		Path string `json:"path"`
	} `json:"fail"`
}

// faultFS injects one failure into rootFS.
type faultFS struct {
	rootFS
	op, path string
}

var errInjected = errors.New("injected disk failure")

func (f faultFS) create(base, rel string, data []byte) error {
	if f.op == "create" && rel == f.path {
		return errInjected
	}
	return f.rootFS.create(base, rel, data)
}

func (f faultFS) replace(base, rel string, data []byte, perm fs.FileMode) error {
	if f.op == "replace" && rel == f.path {
		return errInjected
	}
	return f.rootFS.replace(base, rel, data, perm)
}

func (f faultFS) remove(base, rel string) error {
	if f.op == "remove" && rel == f.path {
		return errInjected
	}
	return f.rootFS.remove(base, rel)
}

// TestApplyPatchGolden runs every testdata/apply_patch/*.txtar case: it
// lays out the in/ files in a fresh Location, applies the patch section and
// compares the output or error and the resulting files (the out/ sections,
// or the unchanged in/ files when there are none). Run with -update to
// rewrite the expectations.
func TestApplyPatchGolden(t *testing.T) {
	paths, err := filepath.Glob("testdata/apply_patch/*.txtar")
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) < 30 {
		t.Fatalf("found %d golden cases, want at least 30", len(paths))
	}
	for _, path := range paths {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txtar"), func(t *testing.T) {
			runGolden(t, path)
		})
	}
}

func runGolden(t *testing.T, path string) {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	a := parseArchive(string(data))
	var args goldenArgs
	if s, ok := a.get("args.json"); ok {
		if err := json.Unmarshal([]byte(s.text), &args); err != nil {
			t.Fatalf("args.json: %v", err)
		}
	}
	patchSec, ok := a.get("patch")
	if !ok {
		t.Fatal("no patch section")
	}
	var fsys patchFS = rootFS{}
	if args.Fail != nil {
		fsys = faultFS{op: args.Fail.Op, path: args.Fail.Path}
	}
	h := newHookHarness(t, fsys)
	reg, root := h.reg, h.root
	in := make(map[string][]byte)
	hasOut := false
	for _, s := range a.sections {
		switch {
		case strings.HasPrefix(s.name, "in/"):
			rel := strings.TrimPrefix(s.name, "in/")
			p := filepath.Join(root, filepath.FromSlash(rel))
			if strings.HasSuffix(rel, "/") {
				if err := os.MkdirAll(p, 0o755); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			in[rel] = s.bytes(t)
			if err := os.WriteFile(p, in[rel], 0o644); err != nil {
				t.Fatal(err)
			}
		case strings.HasPrefix(s.name, "out/"):
			hasOut = true
		}
	}

	input, _ := json.Marshal(ApplyPatchInput{PatchText: string(patchSec.bytes(t))})
	res, err := reg.Execute(context.Background(), Call{SessionID: "ses_golden", Name: "apply_patch", Input: input})
	var got section
	if err != nil {
		var me *messages.Error
		if !errors.As(err, &me) {
			t.Fatalf("error %v is not typed", err)
		}
		got = section{name: "error", text: me.Error() + "\n"}
	} else {
		got = section{name: "output", text: res.Output + "\n"}
	}
	files := snapshot(t, root)

	if *update {
		var kept []section
		for _, s := range a.sections {
			if s.name != "error" && s.name != "output" && !strings.HasPrefix(s.name, "out/") {
				kept = append(kept, s)
			}
		}
		kept = append(kept, got)
		if !equalFiles(files, in) {
			for _, rel := range slices.Sorted(maps.Keys(files)) {
				kept = append(kept, sectionFor("out/"+rel, files[rel]))
			}
		}
		a.sections = kept
		if err := os.WriteFile(path, []byte(a.format()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}

	want, ok := a.get(got.name)
	if !ok {
		other := map[string]string{"error": "output", "output": "error"}[got.name]
		exp, _ := a.get(other)
		t.Fatalf("got %s:\n%s\nwant %s:\n%s", got.name, got.text, other, exp.text)
	}
	if want.text != got.text {
		t.Fatalf("%s:\n%s\nwant:\n%s", got.name, got.text, want.text)
	}
	expected := in
	if hasOut {
		expected = make(map[string][]byte)
		for _, s := range a.sections {
			if rel, ok := strings.CutPrefix(s.name, "out/"); ok {
				expected[rel] = s.bytes(t)
			}
		}
	}
	if !equalFiles(files, expected) {
		t.Fatalf("files after the patch:\n%s\nwant:\n%s", describeFiles(files), describeFiles(expected))
	}
}

// snapshot returns every regular file under root by slash-separated path.
func snapshot(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := make(map[string][]byte)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		files[filepath.ToSlash(rel)] = data
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func equalFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || !bytes.Equal(v, w) {
			return false
		}
	}
	return true
}

func describeFiles(files map[string][]byte) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "  %s: %q\n", k, files[k])
	}
	return b.String()
}
