package tools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sessiond/sessiond/messages"
)

func readMeta(t *testing.T, res Result) ReadMetadata {
	t.Helper()
	var m ReadMetadata
	if err := json.Unmarshal(res.Metadata, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func numbered(first int, lines ...string) string {
	var b strings.Builder
	for i, l := range lines {
		fmt.Fprintf(&b, "%6d\t%s\n", first+i, l)
	}
	return b.String()
}

func TestReadTextPaging(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	var content strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&content, "line %d\n", i)
	}
	h.write(t, "ten.txt", content.String())
	h.write(t, "crlf.txt", "one\r\ntwo\r\n")
	h.write(t, "nonl.txt", "one\ntwo")
	h.write(t, "empty.txt", "")
	ctx := context.Background()
	tests := []struct {
		name   string
		input  ReadInput
		output string
		meta   ReadMetadata
	}{
		{"whole file", ReadInput{Path: "ten.txt"},
			numbered(1, "line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8", "line 9", "line 10") + "\n(End of file: 10 lines.)",
			ReadMetadata{Path: "ten.txt", Kind: "text", Offset: 1, Count: 10, Total: 10, Size: int64(content.Len())}},
		{"first page", ReadInput{Path: "ten.txt", Limit: 3},
			numbered(1, "line 1", "line 2", "line 3") + "\n(Showing lines 1-3. The file has more lines: call read with offset=4 to continue.)",
			ReadMetadata{Path: "ten.txt", Kind: "text", Offset: 1, Count: 3, Next: 4, Size: int64(content.Len())}},
		{"middle page", ReadInput{Path: "ten.txt", Offset: 4, Limit: 3},
			numbered(4, "line 4", "line 5", "line 6") + "\n(Showing lines 4-6. The file has more lines: call read with offset=7 to continue.)",
			ReadMetadata{Path: "ten.txt", Kind: "text", Offset: 4, Count: 3, Next: 7, Size: int64(content.Len())}},
		{"last page exactly", ReadInput{Path: "ten.txt", Offset: 8, Limit: 3},
			numbered(8, "line 8", "line 9", "line 10") + "\n(End of file: 10 lines.)",
			ReadMetadata{Path: "ten.txt", Kind: "text", Offset: 8, Count: 3, Total: 10, Size: int64(content.Len())}},
		{"last line", ReadInput{Path: "ten.txt", Offset: 10},
			numbered(10, "line 10") + "\n(End of file: 10 lines.)",
			ReadMetadata{Path: "ten.txt", Kind: "text", Offset: 10, Count: 1, Total: 10, Size: int64(content.Len())}},
		{"crlf", ReadInput{Path: "crlf.txt"}, numbered(1, "one", "two") + "\n(End of file: 2 lines.)",
			ReadMetadata{Path: "crlf.txt", Kind: "text", Offset: 1, Count: 2, Total: 2, Size: 10}},
		{"no trailing newline", ReadInput{Path: "nonl.txt"}, numbered(1, "one", "two") + "\n(End of file: 2 lines.)",
			ReadMetadata{Path: "nonl.txt", Kind: "text", Offset: 1, Count: 2, Total: 2, Size: 7}},
		{"empty", ReadInput{Path: "empty.txt"}, "(The file is empty.)",
			ReadMetadata{Path: "empty.txt", Kind: "text", Offset: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res, err := h.call(ctx, t, "read", tc.input)
			if err != nil {
				t.Fatal(err)
			}
			if res.Output != tc.output {
				t.Fatalf("output:\n%s\nwant:\n%s", res.Output, tc.output)
			}
			if got := readMeta(t, res); got != tc.meta {
				t.Fatalf("metadata %+v, want %+v", got, tc.meta)
			}
		})
	}
}

func TestReadErrors(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	h.write(t, "ten.txt", strings.Repeat("x\n", 10))
	if err := syscall.Mkfifo(filepath.Join(h.root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(h.root, "out")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		input any
		want  string
	}{
		{"offset past the end", ReadInput{Path: "ten.txt", Offset: 12}, "offset 12 is beyond the end of the file, which has 10 lines; use an offset from 1 to 10"},
		{"offset just past the end", ReadInput{Path: "ten.txt", Offset: 11}, "offset 11 is beyond the end of the file"},
		{"missing", ReadInput{Path: "nope.txt"}, "read nope.txt: no such file or directory"},
		{"absolute", ReadInput{Path: "/etc/hostname"}, "absolute paths are not allowed"},
		{"escape", ReadInput{Path: "../x"}, "escapes its root directory"},
		{"symlink escape", ReadInput{Path: "out/x"}, "through a symbolic link"},
		{"fifo", ReadInput{Path: "fifo"}, "not a regular file or directory"},
		{"schema: zero offset", map[string]any{"path": "ten.txt", "offset": 0}, "at /offset"},
		{"schema: limit too large", map[string]any{"path": "ten.txt", "limit": 2001}, "at /limit"},
		{"schema: no path", map[string]any{}, "missing property 'path'"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := h.call(context.Background(), t, "read", tc.input)
			if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want tool.execution containing %q", err, tc.want)
			}
		})
	}
}

func TestReadLongLinesAndPageBudget(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{MaxLineBytes: 10, MaxPageBytes: 60}}})
	// "é" is two bytes: a cut at byte 10 must not split it.
	h.write(t, "long.txt", "short\n"+"abcdefghié-tail\n"+strings.Repeat("z", 100)+"\r\n"+"after\n")
	res, err := h.call(context.Background(), t, "read", ReadInput{Path: "long.txt"})
	if err != nil {
		t.Fatal(err)
	}
	// The page budget (60 bytes, markers included) admits "short" and the
	// truncated second line, then stops with a cursor.
	want := numbered(1, "short", "abcdefghi… [line truncated: 7 more bytes]") +
		"\n(Showing lines 1-2. The file has more lines: call read with offset=3 to continue.)"
	if res.Output != want {
		t.Fatalf("output:\n%q\nwant:\n%q", res.Output, want)
	}
	res, err = h.call(context.Background(), t, "read", ReadInput{Path: "long.txt", Offset: 3})
	if err != nil {
		t.Fatal(err)
	}
	// The CRLF ending of the long line is not counted as dropped content.
	want = numbered(3, "zzzzzzzzzz… [line truncated: 90 more bytes]", "after") + "\n(End of file: 4 lines.)"
	if res.Output != want {
		t.Fatalf("output:\n%q\nwant:\n%q", res.Output, want)
	}
	if m := readMeta(t, res); m.Truncated != 1 || m.Next != 0 || m.Total != 4 {
		t.Fatalf("metadata %+v", m)
	}
}

func TestReadBinary(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{MaxBinaryBytes: 64}}})
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	h.write(t, "img.png", string(png))
	h.write(t, "big.bin", strings.Repeat("\x00", 65))
	h.write(t, "latin1.txt", "caf\xe9\n") // not UTF-8: binary
	res, err := h.call(context.Background(), t, "read", ReadInput{Path: "img.png"})
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString(png)
	if !strings.HasSuffix(res.Output, "\n"+b64) || !strings.Contains(res.Output, "image/png") {
		t.Fatalf("output %q", res.Output)
	}
	if m := readMeta(t, res); m.Kind != "binary" || m.Encoding != "base64" || m.Size != int64(len(png)) || m.Mime != "image/png" {
		t.Fatalf("metadata %+v", m)
	}
	if _, err := h.call(context.Background(), t, "read", ReadInput{Path: "big.bin"}); err == nil || !strings.Contains(err.Error(), "exceeds the limit of 64 bytes") {
		t.Fatalf("oversized binary: %v", err)
	}
	res, err = h.call(context.Background(), t, "read", ReadInput{Path: "latin1.txt"})
	if err != nil || readMeta(t, res).Kind != "binary" {
		t.Fatalf("invalid UTF-8 must be binary: %v %+v", err, res)
	}
}

func TestIsBinaryToleratesRuneCutBySniffWindow(t *testing.T) {
	text := strings.Repeat("a", sniffBytes-1) + "é" + "rest\n" // 'é' straddles the window
	br := bufio.NewReaderSize(strings.NewReader(text), readBufferSize)
	if isBinary(br) {
		t.Fatal("valid UTF-8 cut by the sniff window was classified binary")
	}
}

func TestReadDirectory(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{DefaultLimit: 4}}})
	for _, f := range []string{"b.txt", "A.txt", "a.txt", "Zeta/x", "alpha/x", "beta/x", ".hidden"} {
		h.write(t, f, "x")
	}
	if err := os.Symlink("alpha", filepath.Join(h.root, "link-to-dir")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(h.root, "link-out")); err != nil {
		t.Fatal(err)
	}
	h.write(t, "emptydir/.keep", "")
	if err := os.Remove(filepath.Join(h.root, "emptydir/.keep")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Directories (including the link to one inside the root) first, then
	// files; case-folded alphabetical order, ties by bytes.
	all := []string{"alpha/", "beta/", "emptydir/", "link-to-dir/", "Zeta/", ".hidden", "A.txt", "a.txt", "b.txt", "link-out"}
	res, err := h.call(ctx, t, "read", ReadInput{Path: "."})
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join(all[:4], "\n") + "\n\n(Showing entries 1-4 of 10. Call read with offset=5 to continue.)"
	if res.Output != want {
		t.Fatalf("page 1:\n%s\nwant:\n%s", res.Output, want)
	}
	if m := readMeta(t, res); m != (ReadMetadata{Path: ".", Kind: "directory", Offset: 1, Count: 4, Next: 5, Total: 10}) {
		t.Fatalf("metadata %+v", m)
	}
	res, err = h.call(ctx, t, "read", ReadInput{Path: ".", Offset: 5})
	if err != nil {
		t.Fatal(err)
	}
	want = strings.Join(all[4:8], "\n") + "\n\n(Showing entries 5-8 of 10. Call read with offset=9 to continue.)"
	if res.Output != want {
		t.Fatalf("page 2:\n%s\nwant:\n%s", res.Output, want)
	}
	res, err = h.call(ctx, t, "read", ReadInput{Path: ".", Offset: 9, Limit: 4})
	if err != nil {
		t.Fatal(err)
	}
	want = strings.Join(all[8:], "\n") + "\n\n(10 entries.)"
	if res.Output != want {
		t.Fatalf("page 3:\n%s\nwant:\n%s", res.Output, want)
	}
	if _, err := h.call(ctx, t, "read", ReadInput{Path: ".", Offset: 11}); err == nil || !strings.Contains(err.Error(), "beyond the end of the directory") {
		t.Fatalf("offset past the entries: %v", err)
	}
	res, err = h.call(ctx, t, "read", ReadInput{Path: "emptydir"})
	if err != nil || res.Output != "(The directory is empty.)" {
		t.Fatalf("empty dir: %q %v", res.Output, err)
	}
}

func TestReadShowsNamesThatAreNotPlainQuoted(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	// Names are bytes; output must be valid UTF-8, one entry per line.
	for _, f := range []string{"d/ok.txt", "d/bad\xff.txt", "d/bad\xfe.txt", "d/two\nlines.txt", `d/say"hi".txt`, "d/sub\xff/x", "d/é.txt"} {
		h.write(t, f, "x")
	}
	if err := os.WriteFile(filepath.Join(h.root, "img\xff.bin"), []byte{0, 1, 2}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("img\xff.bin", filepath.Join(h.root, "img.bin")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// Sorted by the real names' bytes, whatever the shown names.
	all := []string{`"sub\xff"/`, `"bad\xfe.txt"`, `"bad\xff.txt"`, "ok.txt", `"say\"hi\".txt"`, `"two\nlines.txt"`, "é.txt"}
	res, err := h.call(ctx, t, "read", ReadInput{Path: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Join(all, "\n") + "\n\n(7 entries.)"; res.Output != want {
		t.Fatalf("listing:\n%s\nwant:\n%s", res.Output, want)
	}
	// Paging walks the same entries, one per page.
	for i, offset := 0, 1; offset != 0; i++ {
		res, err := h.call(ctx, t, "read", ReadInput{Path: "d", Offset: offset, Limit: 1})
		if err != nil {
			t.Fatalf("offset %d: %v", offset, err)
		}
		if got, _, _ := strings.Cut(res.Output, "\n"); got != all[i] {
			t.Fatalf("offset %d shows %q, want %q", offset, got, all[i])
		}
		offset = readMeta(t, res).Next
	}
	// A binary file reached through a link shows its canonical name quoted.
	res, err = h.call(ctx, t, "read", ReadInput{Path: "img.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Output, `Binary file "img\xff.bin" (3 bytes`) || res.Title != `"img\xff.bin"` {
		t.Fatalf("title %q, output %q", res.Title, res.Output)
	}
}

func TestShowName(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"a.txt", "a.txt"},
		{"dir/with space/é日本.go", "dir/with space/é日本.go"},
		{"bad\xff", `"bad\xff"`},
		{"a\ufffd", "\"a\ufffd\""}, // quoted, so that it is not taken for an invalid byte
		{"tab\there", `"tab\there"`},
		{`back\slash`, `"back\\slash"`},
		{`"quoted"`, `"\"quoted\""`},
	} {
		got := showName(tc.name)
		if got != tc.want {
			t.Errorf("showName(%q) = %q, want %q", tc.name, got, tc.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("showName(%q) = %q is not valid UTF-8", tc.name, got)
		}
		if got != tc.name {
			if back, err := strconv.Unquote(got); err != nil || back != tc.name {
				t.Errorf("strconv.Unquote(%q) = %q, %v; want %q", got, back, err, tc.name)
			}
		}
	}
}

func TestReadAuthorizesTheCanonicalPath(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Once)}
	h := newHarness(t, harnessConfig{asker: asker})
	h.write(t, "real/secret.env", "TOKEN=1\n")
	if err := os.Symlink("real", filepath.Join(h.root, "alias")); err != nil {
		t.Fatal(err)
	}
	if _, err := h.call(context.Background(), t, "read", ReadInput{Path: "alias/secret.env"}); err != nil {
		t.Fatal(err)
	}
	asked := asker.requests()
	want := filepath.Join(h.root, "real", "secret.env")
	if len(asked) != 1 || asked[0].Permission != PermissionRead || len(asked[0].Patterns) != 1 || asked[0].Patterns[0] != want {
		t.Fatalf("asked %+v, want read of the canonical %s", asked, want)
	}
	// A deny rule on the canonical path applies through the alias.
	h2 := newHarness(t, harnessConfig{rules: Ruleset{{"read", "*", Allow}, {"read", "*.env", Deny}}})
	h2.write(t, "real/secret.env", "TOKEN=1\n")
	if err := os.Symlink("real/secret.env", filepath.Join(h2.root, "innocent.txt")); err != nil {
		t.Fatal(err)
	}
	_, err := h2.call(context.Background(), t, "read", ReadInput{Path: "innocent.txt"})
	if errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("got %v, want permission.rejected via the canonical path", err)
	}
	// A denied path that does not exist is denied too: the answer must not
	// tell which denied paths exist.
	_, err = h2.call(context.Background(), t, "read", ReadInput{Path: "missing.env"})
	if errorType(t, err) != messages.ErrPermissionRejected {
		t.Fatalf("missing denied file: %v, want permission.rejected", err)
	}
	// Nor what resolving a denied path finds on the way ("x is a file").
	h3 := newHarness(t, harnessConfig{rules: Ruleset{{"read", "*", Allow}, {"read", "*/secret/*", Deny}}})
	h3.write(t, "secret/prod-db-password", "hunter2\n")
	for _, p := range []string{"secret/staging-db-password/x", "secret/prod-db-password/x"} {
		if _, err := h3.call(context.Background(), t, "read", ReadInput{Path: p}); errorType(t, err) != messages.ErrPermissionRejected {
			t.Fatalf("%s: %v, want permission.rejected", p, err)
		}
	}
	// Nor through a link to a denied directory.
	if err := os.Symlink("secret", filepath.Join(h3.root, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"alias/staging-db-password/x", "alias/prod-db-password/x"} {
		if _, err := h3.call(context.Background(), t, "read", ReadInput{Path: p}); errorType(t, err) != messages.ErrPermissionRejected {
			t.Fatalf("%s: %v, want permission.rejected", p, err)
		}
	}
	// Nor by listing a directory whose contents are denied, here or
	// through the link.
	for _, p := range []string{"secret", "alias", "secret/"} {
		res, err := h3.call(context.Background(), t, "read", ReadInput{Path: p})
		if errorType(t, err) != messages.ErrPermissionRejected {
			t.Fatalf("list %s: %+v, %v; want permission.rejected", p, res, err)
		}
	}
	if res, err := h3.call(context.Background(), t, "read", ReadInput{Path: "."}); err != nil || !strings.Contains(res.Output, "secret/") {
		t.Fatalf("the root's listing: %+v, %v", res, err)
	}
	// An allowed path still gets the resolution's own error.
	h3.write(t, "notes", "x")
	if _, err := h3.call(context.Background(), t, "read", ReadInput{Path: "notes/x"}); err == nil || !strings.Contains(err.Error(), "notes is a file") {
		t.Fatalf("allowed path through a file: %v", err)
	}
}

func TestReadDirectoryAsksOnceForItAndItsContents(t *testing.T) {
	asker := &scriptedAsker{answer: answerAlways(Always)}
	h := newHarness(t, harnessConfig{asker: asker})
	h.write(t, "sub/a.txt", "x")
	canon, err := filepath.EvalSymlinks(filepath.Join(h.root, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := h.call(ctx, t, "read", ReadInput{Path: "sub"})
	if err != nil || !strings.Contains(res.Output, "a.txt") {
		t.Fatalf("listing: %+v, %v", res, err)
	}
	asked := asker.requests()
	if len(asked) != 1 || !slices.Equal(asked[0].Patterns, []string{canon, canon + "/*"}) {
		t.Fatalf("asked %+v, want one question for %s and %s/*", asked, canon, canon)
	}
	// "always" saved both: listing again asks nothing.
	if _, err := h.call(ctx, t, "read", ReadInput{Path: "sub"}); err != nil {
		t.Fatal(err)
	}
	if n := len(asker.requests()); n != 1 {
		t.Fatalf("%d questions after the approval, want 1", n)
	}
	// A file is one pattern.
	if _, err := h.call(ctx, t, "read", ReadInput{Path: "sub/a.txt"}); err != nil {
		t.Fatal(err)
	}
	if asked := asker.requests(); len(asked) != 2 || !slices.Equal(asked[1].Patterns, []string{canon + "/a.txt"}) {
		t.Fatalf("asked %+v", asked)
	}
}

func TestReadReference(t *testing.T) {
	lib := t.TempDir()
	if err := os.WriteFile(filepath.Join(lib, "util.go"), []byte("package util\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, harnessConfig{rules: allowAll, refs: map[string]string{"lib": lib}})
	res, err := h.call(context.Background(), t, "read", ReadInput{Path: "@lib/util.go"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != numbered(1, "package util")+"\n(End of file: 1 line.)" || res.Title != "@lib/util.go" {
		t.Fatalf("result %+v", res)
	}
}

// writeLargeFile writes lines "line 000000001 ..." padded to lineLen bytes
// until the file reaches size bytes, and returns the number of lines.
func writeLargeFile(tb testing.TB, path string, size int64, lineLen int) int {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	pad := strings.Repeat("x", lineLen)
	n := 0
	for written := int64(0); written < size; n++ {
		k, _ := fmt.Fprintf(w, "line %09d %s\n", n+1, pad[:lineLen-16])
		written += int64(k)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return n
}

func TestReadLargeFileFirstAndLastPageStream(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	const size = 32 << 20
	lines := writeLargeFile(t, filepath.Join(h.root, "large.log"), size, 100)
	ctx := context.Background()
	measure := func(in ReadInput) (Result, uint64) {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		res, err := h.call(ctx, t, "read", in)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		return res, after.TotalAlloc - before.TotalAlloc
	}
	first, alloc := measure(ReadInput{Path: "large.log"})
	m := readMeta(t, first)
	if m.Offset != 1 || m.Next == 0 || !strings.HasPrefix(first.Output, fmt.Sprintf("%6d\tline 000000001 ", 1)) {
		t.Fatalf("first page metadata %+v", m)
	}
	if alloc > size/4 {
		t.Fatalf("first page allocated %d bytes for a %d-byte file", alloc, size)
	}
	offset := lines - 9
	last, alloc := measure(ReadInput{Path: "large.log", Offset: offset, Limit: 50})
	m = readMeta(t, last)
	if m.Offset != offset || m.Count != 10 || m.Next != 0 || m.Total != lines {
		t.Fatalf("last page metadata %+v (lines %d)", m, lines)
	}
	if !strings.Contains(last.Output, fmt.Sprintf("line %09d", lines)) || !strings.HasSuffix(last.Output, fmt.Sprintf("(End of file: %d lines.)", lines)) {
		t.Fatalf("last page output tail %q", last.Output[max(0, len(last.Output)-200):])
	}
	// Streaming: reading to the end of a 32 MiB file must not allocate
	// anything close to its size.
	if alloc > size/4 {
		t.Fatalf("last page allocated %d bytes for a %d-byte file", alloc, size)
	}
}

func TestReadCancelledWhileSkipping(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	writeLargeFile(t, filepath.Join(h.root, "big.log"), 4<<20, 64)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f, err := os.Open(filepath.Join(h.root, "big.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = readTextPage(ctx, bufio.NewReader(f), pageLimits{offset: 60000, limit: 10, maxLine: 100, maxPage: 1000})
	if err != context.Canceled {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	// Within one endless line too (the rest of a huge or sparse file).
	_, err = readTextPage(ctx, bufio.NewReader(endless{}), pageLimits{offset: 1, limit: 10, maxLine: 100, maxPage: 1000})
	if err != context.Canceled {
		t.Fatalf("in an endless line: got %v, want context.Canceled", err)
	}
}

// endless reads as one line that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// TestOpenNoBlockDoesNotWaitForAFIFO: the open read and apply_patch use
// returns at once for a FIFO without a writer (a path swapped to one
// after a stat would otherwise block in open, past any cancellation), and
// apply_patch refuses to read one.
func TestOpenNoBlockDoesNotWaitForAFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	done := make(chan error, 1)
	go func() {
		f, fi, err := openNoBlock(root, "fifo")
		if err == nil {
			f.Close()
			if fi.Mode().Type() != fs.ModeNamedPipe {
				err = fmt.Errorf("mode %v", fi.Mode())
			}
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("opening a FIFO blocked")
	}
	if _, err := (rootFS{}).read(dir, "fifo", 1<<20); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("apply_patch's read of a FIFO: %v", err)
	}
}

// TestReadDirectoryPageBudget: a listing page ends at the page budget as
// well as at its entry limit, with a cursor to the rest, and still shows
// one entry when that alone is over the budget.
func TestReadDirectoryPageBudget(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{MaxPageBytes: 16}}})
	for _, f := range []string{"aaaa", "bbbb", "cccc", "dddd", strings.Repeat("e", 40)} {
		h.write(t, "d/"+f, "x")
	}
	var pages []string
	for offset := 1; offset != 0; {
		res, err := h.call(context.Background(), t, "read", ReadInput{Path: "d", Offset: offset})
		if err != nil {
			t.Fatal(err)
		}
		var meta ReadMetadata
		if err := json.Unmarshal(res.Metadata, &meta); err != nil {
			t.Fatal(err)
		}
		listed, _, _ := strings.Cut(res.Output, "\n\n(")
		pages = append(pages, listed)
		offset = meta.Next
	}
	want := []string{"aaaa\nbbbb\ncccc", "dddd", strings.Repeat("e", 40)}
	if !slices.Equal(pages, want) {
		t.Fatalf("pages %q, want %q", pages, want)
	}
}
