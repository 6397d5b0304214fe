package tools

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessiond/sessiond/messages"
)

// A line cut at MaxLineBytes that the page budget pushes to the next page
// is not counted as truncated on the page that does not show it: the
// metadata counts the cut lines the page shows.
func TestReadTruncatedCountsOnlyShownLines(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll, builtins: BuiltinConfig{Read: ReadConfig{MaxLineBytes: 10, MaxPageBytes: 20}}})
	h.write(t, "f.txt", strings.Repeat("a", 10)+"\n"+strings.Repeat("b", 50)+"\n")
	ctx := context.Background()
	res, err := h.call(ctx, t, "read", ReadInput{Path: "f.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if want := numbered(1, strings.Repeat("a", 10)); !strings.HasPrefix(res.Output, want) || strings.Contains(res.Output, "line truncated") {
		t.Fatalf("page 1:\n%q", res.Output)
	}
	if m := readMeta(t, res); m.Count != 1 || m.Next != 2 || m.Truncated != 0 {
		t.Fatalf("page 1 metadata %+v: it shows no cut line", m)
	}
	res, err = h.call(ctx, t, "read", ReadInput{Path: "f.txt", Offset: 2})
	if err != nil {
		t.Fatal(err)
	}
	if m := readMeta(t, res); m.Count != 1 || m.Truncated != 1 || m.Total != 2 {
		t.Fatalf("page 2 metadata %+v", m)
	}
}

// A symbolic link to a directory inside the root lists as a directory
// (first, with a '/') whether its target is written relative or absolute:
// read follows both into the directory.
func TestReadListsAbsoluteLinkToInsideDirectoryAsDirectory(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	h.write(t, "sub/x", "x")
	h.write(t, "a.txt", "a")
	if err := os.Symlink(filepath.Join(h.root, "sub"), filepath.Join(h.root, "abs-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(h.root, "rel-link")); err != nil {
		t.Fatal(err)
	}
	// Out and back in: the canonical target is inside the root.
	out := t.TempDir()
	if err := os.Symlink(filepath.Join(h.root, "sub"), filepath.Join(out, "back")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(out, "back"), filepath.Join(h.root, "round-trip")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(h.root, "outside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("missing", filepath.Join(h.root, "dangling")); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, link := range []string{"abs-link", "rel-link", "round-trip"} {
		res, err := h.call(ctx, t, "read", ReadInput{Path: link})
		if err != nil || readMeta(t, res).Kind != "directory" {
			t.Fatalf("read %s: %v %s", link, err, res.Metadata)
		}
	}
	res, err := h.call(ctx, t, "read", ReadInput{Path: "."})
	if err != nil {
		t.Fatal(err)
	}
	want := "abs-link/\nrel-link/\nround-trip/\nsub/\na.txt\ndangling\noutside\n\n(7 entries.)"
	if res.Output != want {
		t.Fatalf("listing:\n%s\nwant:\n%s", res.Output, want)
	}
}

// A socket (like a device or a FIFO) is refused as what it is, without
// being opened: opening a socket fails with "no such device or address",
// which told the model nothing true, and opening a device runs its driver.
func TestReadRefusesSocketUnopened(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	l, err := net.Listen("unix", filepath.Join(h.root, "s"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = h.call(context.Background(), t, "read", ReadInput{Path: "s"})
	if errorType(t, err) != messages.ErrToolExecution || !strings.Contains(err.Error(), "not a regular file or directory") {
		t.Fatalf("read of a socket: %v", err)
	}
}

// A directory of one entry says "1 entry", as a file of one line says
// "1 line".
func TestReadListingOfOneEntry(t *testing.T) {
	h := newHarness(t, harnessConfig{rules: allowAll})
	h.write(t, "d/only.txt", "x")
	res, err := h.call(context.Background(), t, "read", ReadInput{Path: "d"})
	if err != nil {
		t.Fatal(err)
	}
	if want := "only.txt\n\n(1 entry.)"; res.Output != want {
		t.Fatalf("listing %q, want %q", res.Output, want)
	}
}
