package wire

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// TestRewriteLines: every line is rewritten once, whole, a line longer
// than the reader's buffer and a last line without its ending included,
// and the body's error comes after the lines read before it.
func TestRewriteLines(t *testing.T) {
	long := strings.Repeat("x", 10000)
	body := "a\n" + long + "\r\n\nlast"
	var seen []string
	upper := func(line []byte) []byte {
		seen = append(seen, string(line))
		return bytes.ToUpper(line)
	}
	failure := errors.New("cut")
	r := RewriteLines(io.NopCloser(io.MultiReader(iotest.OneByteReader(strings.NewReader(body)), iotest.ErrReader(failure))), upper)
	got, err := io.ReadAll(r)
	if !errors.Is(err, failure) {
		t.Fatalf("error %v, want %v", err, failure)
	}
	if string(got) != strings.ToUpper(body) {
		t.Fatalf("read %q…, want the body in upper case", got[:min(len(got), 20)])
	}
	if want := []string{"a\n", long + "\r\n", "\n", "last"}; strings.Join(seen, "|") != strings.Join(want, "|") {
		t.Fatalf("rewrote %d lines, want %d", len(seen), len(want))
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}
