package runes

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzWholeClip: Whole drops only a character cut off at the end (fewer
// than UTFMax bytes), so valid text cut anywhere stays valid; Clip keeps
// at most max bytes of s on a character boundary, and valid text stays
// valid.
func FuzzWholeClip(f *testing.F) {
	for _, s := range []string{"", "abc", "日本語", "é", "\xff\xfe", "a\xe6\x97", "😀x"} {
		f.Add(s, 2)
	}
	f.Fuzz(func(t *testing.T, s string, max int) {
		n := Whole([]byte(s))
		if n < 0 || n > len(s) || len(s)-n >= utf8.UTFMax {
			t.Fatalf("Whole(%q) = %d", s, n)
		}
		for cut := 0; cut <= len(s); cut++ {
			if utf8.ValidString(s) && !utf8.Valid([]byte(s[:cut])[:Whole([]byte(s[:cut]))]) {
				t.Fatalf("Whole of %q cut at %d leaves invalid text", s, cut)
			}
		}
		if max < 0 || max > 1<<16 {
			return
		}
		c := Clip(s, max)
		if len(s) <= max {
			if c != s {
				t.Fatalf("Clip(%q, %d) = %q", s, max, c)
			}
			return
		}
		body, ok := strings.CutSuffix(c, "…")
		if !ok || len(body) > max || !strings.HasPrefix(s, body) {
			t.Fatalf("Clip(%q, %d) = %q", s, max, c)
		}
		if utf8.ValidString(s) && !utf8.ValidString(c) {
			t.Fatalf("Clip(%q, %d) = %q is not valid UTF-8", s, max, c)
		}
	})
}
