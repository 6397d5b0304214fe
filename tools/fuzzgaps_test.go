package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
	"github.com/sessiond/sessiond/tools/patch"
)

// snapshotFiles returns the content of every regular file under each dir,
// keyed by absolute path.
func snapshotFiles(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[p] = string(b)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// FuzzApplyPatchTool runs apply_patch, every permission allowed, with any
// patch text over a Location holding a few files, a project reference and
// a directory beside both that no path may reach: it never panics, fails
// only with typed tool errors, never changes anything outside the Location
// and the reference, changes nothing when it says so, and on success leaves
// exactly what the patch describes (added files with their lines, updated
// files as patch.Apply makes them, deleted files gone, every other file as
// it was).
func FuzzApplyPatchTool(f *testing.F) {
	for _, s := range []string{
		"*** Begin Patch\n*** Add File: new/n.txt\n+hello\n*** End Patch\n",
		"*** Begin Patch\n*** Update File: a.txt\n@@\n one\n-two\n+TWO\n*** End Patch",
		"*** Begin Patch\n*** Update File: dir/b.txt\n@@ x\n+between\n*** End of File\n*** Delete File: a.txt\n*** End Patch",
		"*** Begin Patch\n*** Update File: @lib/l.txt\n-lib\n+LIB\n*** Add File: @lib/sub/m.txt\n+m\n*** End Patch",
		"*** Begin Patch\n*** Delete File: ../outside/secret.txt\n*** End Patch",
		"*** Begin Patch\n*** Update File: a.txt\n*** Move to: c.txt\n@@\n-one\n*** End Patch",
		"*** Begin Patch\n*** Add File: a.txt\n+again\n*** End Patch",
		"*** Begin Patch\n*** Update File: empty\n@@\n+first\n*** End Patch",
		"*** Begin Patch\n*** Delete File: dir\n*** End Patch",
		"*** Begin Patch\n*** Update File: a.txt\n-two\n+2\n*** Update File: ./a.txt\n-three\n+3\n*** End Patch",
		"*** Begin Patch\n*** Add File: dir/b.txt/c\n+x\n*** End Patch",
		"*** Begin Patch\n*** Update File: dir/../a.txt\n@@ one\n two\n+2.5\n*** End Patch",
		"*** Begin Patch\r\n*** Add File: crlf.txt\r\n+a\r\n+b\r\n*** End Patch\r\n",
		"*** Begin Patch\n*** Add File: /abs\n+x\n*** End Patch", "garbage", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		lib, outside := t.TempDir(), t.TempDir()
		h := newHarness(t, harnessConfig{rules: allowAll, refs: map[string]string{"lib": lib}})
		lib = h.reg.Paths().References()["lib"]
		h.write(t, "a.txt", "one\ntwo\nthree\n")
		h.write(t, "dir/b.txt", "x\r\ny\r\n")
		h.write(t, "empty", "")
		for p, content := range map[string]string{filepath.Join(lib, "l.txt"): "lib\n", filepath.Join(outside, "secret.txt"): "secret\n"} {
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := snapshotFiles(t, h.root, lib, outside)
		outsideBefore := snapshotFiles(t, outside)

		_, err := h.call(context.Background(), t, "apply_patch", ApplyPatchInput{PatchText: text})
		after := snapshotFiles(t, h.root, lib, outside)
		if got := snapshotFiles(t, outside); !maps.Equal(got, outsideBefore) {
			t.Fatalf("patch %q changed files outside the Location and its reference: %v", text, got)
		}
		if err != nil {
			var me *messages.Error
			if !errors.As(err, &me) || me.Type != messages.ErrToolExecution {
				t.Fatalf("patch %q: error %v (%T) is not a tool.execution *messages.Error", text, err, err)
			}
			if !strings.Contains(me.Message, "partly applied") && !maps.Equal(after, before) {
				t.Fatalf("patch %q failed with %q but changed files:\nbefore %q\nafter  %q", text, me.Message, before, after)
			}
			return
		}
		// The text the tool parsed is what JSON carried: invalid UTF-8
		// arrives as U+FFFD.
		var in ApplyPatchInput
		raw, _ := json.Marshal(ApplyPatchInput{PatchText: text})
		if err := json.Unmarshal(raw, &in); err != nil {
			t.Fatal(err)
		}
		parsed, err := patch.Parse(in.PatchText)
		if err != nil {
			t.Fatalf("patch %q applied but does not parse: %v", text, err)
		}
		want := maps.Clone(before)
		for _, op := range parsed.Ops {
			var p string
			if rest, ok := strings.CutPrefix(op.Path, "@lib/"); ok {
				p = filepath.Join(lib, rest)
			} else {
				p = filepath.Join(h.root, op.Path)
			}
			switch op.Kind {
			case patch.Add:
				want[p] = string(op.NewContent())
			case patch.Delete:
				if _, ok := want[p]; !ok {
					t.Fatalf("patch %q: deleted %s, which was no file", text, p)
				}
				delete(want, p)
			case patch.Update:
				old, ok := want[p]
				if !ok {
					t.Fatalf("patch %q: updated %s, which was no file", text, p)
				}
				b, err := patch.Apply([]byte(old), op.Hunks)
				if err != nil {
					t.Fatalf("patch %q: applied, but its hunks do not apply to %s: %v", text, p, err)
				}
				want[p] = string(b)
			}
		}
		if !maps.EqualFunc(after, want, func(a, b string) bool { return a == b }) {
			keys := slices.Sorted(maps.Keys(after))
			var diff bytes.Buffer
			for _, k := range keys {
				if after[k] != want[k] {
					diff.WriteString(k + ": got " + after[k] + " want " + want[k] + "\n")
				}
			}
			t.Fatalf("patch %q: files after\n%q\nwant\n%q\n%s", text, after, want, diff.String())
		}
	})
}

// FuzzReadTool runs read, every permission allowed, with any input over a
// Location holding text, binary and oversized files, a directory and links
// into and out of it: it never panics, fails only with typed tool errors,
// never shows what lies outside the Location (through "..", an absolute
// path or a link), and a page it returns keeps to the limits the input and
// the configuration set.
func FuzzReadTool(f *testing.F) {
	for _, s := range []string{
		`{"path":"text.txt"}`, `{"path":"text.txt","offset":40,"limit":5}`, `{"path":"text.txt","offset":1e1,"limit":2.0}`,
		`{"path":"long.txt"}`, `{"path":"crlf.txt","offset":2}`, `{"path":"bin"}`, `{"path":"dir","limit":1}`, `{"path":"dir","offset":3}`,
		`{"path":"."}`, `{"path":"link_out"}`, `{"path":"link_in"}`, `{"path":"../outside/secret.txt"}`, `{"path":"/etc/passwd"}`,
		`{"path":"text.txt","offset":0}`, `{"path":"text.txt","offset":-1}`, `{"path":"text.txt","limit":51}`, `{"path":"text.txt","offset":1000}`,
		`{"path":"text.txt","offset":9223372036854775807}`, `{"path":""}`, `{}`, `{"path":"a","x":1}`, `[]`, ``, `{"path":"dir/../text.txt"}`,
		`{"path":"empty"}`, `{"path":"nope/x"}`, `{"path":"text.txt/x"}`,
	} {
		f.Add([]byte(s))
	}
	const secret = "SECRET-OUTSIDE"
	const limit = 50
	h := newHarness(f, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{
		DefaultLimit: limit, MaxLineBytes: 100, MaxPageBytes: 2000, MaxBinaryBytes: 4096}}})
	outside := filepath.Join(filepath.Dir(h.root), "outside")
	if err := os.MkdirAll(outside, 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "secret.txt"), []byte(secret+"\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	var text strings.Builder
	for i := range 120 {
		text.WriteString(strings.Repeat("x", i) + "\n")
	}
	h.write(f, "text.txt", text.String())
	h.write(f, "long.txt", strings.Repeat("é", 3000)+"\nshort\n")
	h.write(f, "crlf.txt", "a\r\nb\r\nc")
	h.write(f, "bin", "\x00\x01\x02"+secret[:3])
	h.write(f, "empty", "")
	h.write(f, "dir/one", "1")
	h.write(f, "dir/two/three", "3")
	for link, target := range map[string]string{"link_out": filepath.Join(outside, "secret.txt"), "link_in": "text.txt", "dir/up": ".."} {
		if err := os.Symlink(target, filepath.Join(h.root, link)); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		res, err := h.reg.Execute(context.Background(), Call{SessionID: "ses_test", AssistantMessageID: "msg_a", CallID: "call_1", Name: "read", Input: input})
		if err != nil {
			var me *messages.Error
			if !errors.As(err, &me) || me.Type != messages.ErrToolExecution {
				t.Fatalf("input %q: error %v (%T) is not a tool.execution *messages.Error", input, err, err)
			}
			if strings.Contains(me.Message, secret) {
				t.Fatalf("input %q: the error shows what lies outside: %q", input, me.Message)
			}
			return
		}
		if strings.Contains(res.Output, secret) || strings.Contains(res.Output, "U0VDUkVU") {
			t.Fatalf("input %q: read what lies outside the Location: %q", input, res.Output)
		}
		var meta ReadMetadata
		if err := json.Unmarshal(res.Metadata, &meta); err != nil {
			t.Fatalf("input %q: metadata %s: %v", input, res.Metadata, err)
		}
		var in struct {
			Offset float64 `json:"offset"`
			Limit  float64 `json:"limit"`
		}
		_ = json.Unmarshal(input, &in)
		wantLimit := limit
		if in.Limit > 0 {
			wantLimit = int(in.Limit)
		}
		switch meta.Kind {
		case "text", "directory":
			if meta.Count > wantLimit || meta.Count < 0 {
				t.Fatalf("input %q: %d lines or entries, limit %d", input, meta.Count, wantLimit)
			}
			if meta.Count > 0 && in.Offset > 0 && meta.Offset != int(in.Offset) {
				t.Fatalf("input %q: page starts at %d", input, meta.Offset)
			}
			if meta.Next != 0 && meta.Next != meta.Offset+meta.Count {
				t.Fatalf("input %q: next %d after %d from %d", input, meta.Next, meta.Count, meta.Offset)
			}
			if meta.Kind == "text" && len(res.Output) > 2000+200*meta.Count+400 {
				t.Fatalf("input %q: a page of %d bytes", input, len(res.Output))
			}
		case "binary":
		default:
			t.Fatalf("input %q: kind %q", input, meta.Kind)
		}
	})
}

// snapshotEntries returns every regular file (its content) and symbolic
// link ("-> " and its target) under each dir, keyed by absolute path,
// without following links.
func snapshotEntries(t *testing.T, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			switch {
			case err != nil || d.IsDir():
				return err
			case d.Type()&fs.ModeSymlink != 0:
				target, err := os.Readlink(p)
				out[p] = "-> " + target
				return err
			}
			b, err := os.ReadFile(p)
			out[p] = string(b)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// FuzzApplyPatchOps is FuzzApplyPatchTool with the patch built from two
// operations (kind, path and body each), so that most inputs are patches,
// over a Location whose links lead to a file and a directory inside it, to
// its reference, to a directory beside it and nowhere: whatever the paths,
// nothing beside the Location and its reference changes; a failure that
// says so changes nothing; a success adds each added file where its path
// resolves (links in its directories followed), updates the file an
// updated path resolves to, removes the entry (a link itself, not its
// target) a deleted path names, and leaves the rest as it was.
func FuzzApplyPatchOps(f *testing.F) {
	type op struct {
		kind       uint8
		path, body string
	}
	for _, s := range [][2]op{
		{{0, "new.txt", "hello\nworld"}, {1, "a.txt", "@@\n one\n-two\n+TWO"}},
		{{1, "link_in", "-one\n+ONE"}, {2, "dir/b.txt", ""}},
		{{2, "link_in", ""}, {0, "dirlink/c.txt", "c"}},
		{{0, "dirlink/sub/d.txt", "d"}, {1, "dirlink/b.txt", "@@ x\n+x2"}},
		{{1, "link_out", "-secret\n+pwned"}, {0, "dirout/new", "x"}},
		{{2, "link_out", ""}, {2, "dirout/secret.txt", ""}},
		{{0, "dir/up/../escape.txt", "x"}, {1, "dir/up/a.txt", "-one\n+1"}},
		{{2, "dangling", ""}, {0, "dangling", "x"}},
		{{0, "liblink/x", "x"}, {1, "@lib/l.txt", "-lib\n+LIB"}},
		{{1, "@lib/../root/a.txt", "-one\n+1"}, {2, "@lib", ""}},
		{{2, "dirlink", ""}, {0, "a.txt/b", "x"}},
		{{0, "x/y", "1"}, {0, "x", "2"}},
		{{1, "empty", "+first"}, {2, "a.txt", ""}},
	} {
		f.Add(s[0].kind, s[0].path, s[0].body, s[1].kind, s[1].path, s[1].body)
	}
	f.Fuzz(func(t *testing.T, k1 uint8, p1, b1 string, k2 uint8, p2, b2 string) {
		var text strings.Builder
		text.WriteString("*** Begin Patch\n")
		for _, o := range []op{{k1, p1, b1}, {k2, p2, b2}} {
			if strings.ContainsAny(o.path, "\r\n") {
				return
			}
			switch o.kind % 3 {
			case 0:
				text.WriteString("*** Add File: " + o.path + "\n")
				for l := range strings.SplitSeq(o.body, "\n") {
					text.WriteString("+" + l + "\n")
				}
			case 1:
				text.WriteString("*** Update File: " + o.path + "\n" + o.body + "\n")
			case 2:
				text.WriteString("*** Delete File: " + o.path + "\n")
			}
		}
		text.WriteString("*** End Patch\n")
		// The tool parses what JSON carried: invalid UTF-8 arrives as
		// U+FFFD.
		var carried ApplyPatchInput
		raw, _ := json.Marshal(ApplyPatchInput{PatchText: text.String()})
		if err := json.Unmarshal(raw, &carried); err != nil {
			t.Fatal(err)
		}

		parent := t.TempDir()
		outside, lib := filepath.Join(parent, "outside"), filepath.Join(parent, "lib")
		for _, d := range []string{outside, lib} {
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for p, content := range map[string]string{filepath.Join(lib, "l.txt"): "lib\n", filepath.Join(outside, "secret.txt"): "secret\n"} {
			if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		h := newHarness(t, harnessConfig{rules: allowAll, refs: map[string]string{"lib": lib}})
		lib = h.reg.Paths().References()["lib"]
		outside = filepath.Join(filepath.Dir(lib), "outside")
		h.write(t, "a.txt", "one\ntwo\nthree\n")
		h.write(t, "dir/b.txt", "x\r\ny\r\n")
		h.write(t, "empty", "")
		for link, target := range map[string]string{"link_in": "a.txt", "dirlink": "dir", "dir/up": "..",
			"link_out": filepath.Join(outside, "secret.txt"), "dirout": outside, "dangling": "nope", "liblink": lib} {
			if err := os.Symlink(target, filepath.Join(h.root, link)); err != nil {
				t.Fatal(err)
			}
		}
		before := snapshotEntries(t, h.root, lib, outside)
		outsideBefore := snapshotEntries(t, outside)

		// Where each operation lands, resolved before anything changes.
		parsed, parseErr := patch.Parse(carried.PatchText)
		type landing struct {
			op    patch.Op
			entry string // the directory entry an add creates or a delete removes
			file  string // the file an update changes
		}
		var landings []landing
		if parseErr == nil {
			for _, o := range parsed.Ops {
				resolve := h.reg.Paths().Resolve
				if o.Kind == patch.Delete {
					resolve = h.reg.Paths().ResolveEntry // a link goes, wherever it points
				}
				res, err := resolve(o.Path)
				if err != nil {
					landings = nil
					break
				}
				landings = append(landings, landing{op: o, entry: filepath.Join(res.Base, filepath.FromSlash(res.Entry)), file: res.Path})
			}
		}

		_, err := h.call(context.Background(), t, "apply_patch", ApplyPatchInput{PatchText: text.String()})
		after := snapshotEntries(t, h.root, lib, outside)
		if got := snapshotEntries(t, outside); !maps.Equal(got, outsideBefore) {
			t.Fatalf("patch %q changed what lies beside the Location: %q", text.String(), got)
		}
		if err != nil {
			var me *messages.Error
			if !errors.As(err, &me) || me.Type != messages.ErrToolExecution {
				t.Fatalf("patch %q: error %v (%T) is not a tool.execution *messages.Error", text.String(), err, err)
			}
			if !strings.Contains(me.Message, "partly applied") && !maps.Equal(after, before) {
				t.Fatalf("patch %q failed with %q but changed files:\nbefore %q\nafter  %q", text.String(), me.Message, before, after)
			}
			return
		}
		if parseErr != nil || len(landings) != len(parsed.Ops) {
			t.Fatalf("patch %q applied, but it does not parse (%v) or its paths do not resolve", text.String(), parseErr)
		}
		want := maps.Clone(before)
		for _, l := range landings {
			switch l.op.Kind {
			case patch.Add:
				want[l.entry] = string(l.op.NewContent())
			case patch.Delete:
				if _, ok := want[l.entry]; !ok {
					t.Fatalf("patch %q: deleted %s, which was neither a file nor a link", text.String(), l.entry)
				}
				delete(want, l.entry)
			case patch.Update:
				old, ok := want[l.file]
				if !ok || strings.HasPrefix(old, "-> ") {
					t.Fatalf("patch %q: updated %s, which was no file", text.String(), l.file)
				}
				b, err := patch.Apply([]byte(old), l.op.Hunks)
				if err != nil {
					t.Fatalf("patch %q: applied, but its hunks do not apply to %s: %v", text.String(), l.file, err)
				}
				want[l.file] = string(b)
			}
		}
		if !maps.Equal(after, want) {
			keys := maps.Clone(after)
			maps.Copy(keys, want)
			var diff strings.Builder
			for _, k := range slices.Sorted(maps.Keys(keys)) {
				if after[k] != want[k] {
					diff.WriteString(k + ": got " + strconv.Quote(after[k]) + ", want " + strconv.Quote(want[k]) + "\n")
				}
			}
			t.Fatalf("patch %q:\n%s", text.String(), diff.String())
		}
	})
}
