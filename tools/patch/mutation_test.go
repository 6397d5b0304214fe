package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestParseTolerance pins the white space the format forgives: blank and
// white-space-only lines around the patch, trailing white space on markers
// and any white space between a marker and its path.
func TestParseTolerance(t *testing.T) {
	tests := []struct {
		name, text string
		want       []Op
	}{
		{"white-space-only lines before begin", " \t\n  \n*** Begin Patch\n*** Delete File: a\n*** End Patch",
			[]Op{{Kind: Delete, Path: "a", Line: 4}}},
		{"white-space-only lines after end", "*** Begin Patch\n*** Delete File: a\n*** End Patch\n \t\n  ",
			[]Op{{Kind: Delete, Path: "a", Line: 2}}},
		{"blank and white-space-only lines after begin", "*** Begin Patch\n\n \t\n*** Delete File: a\n*** End Patch",
			[]Op{{Kind: Delete, Path: "a", Line: 4}}},
		{"tab before the path", "*** Begin Patch\n*** Delete File:\ta\n*** End Patch",
			[]Op{{Kind: Delete, Path: "a", Line: 2}}},
		{"end of file marker with trailing white space", "*** Begin Patch\n*** Update File: a\n@@\n-x\n*** End of File \t\n*** End Patch",
			[]Op{{Kind: Update, Path: "a", Line: 2, Hunks: []Hunk{{Line: 3, EndOfFile: true, Lines: []Line{{Remove, "x"}}}}}}},
		{"move without hunks", "*** Begin Patch\n*** Update File: a\n*** Move to: b\n*** End Patch",
			[]Op{{Kind: Update, Path: "a", MoveTo: "b", Line: 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.text)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Ops, tc.want) {
				t.Fatalf("ops\n%#v\nwant\n%#v", p.Ops, tc.want)
			}
		})
	}
}

// TestParseHunkEdges covers hunk shapes next to the end-of-file marker, a
// white-space-only line at the end of a hunk, and anchors that only look
// like unified-diff range headers: they stay anchors, whole.
func TestParseHunkEdges(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		hunks []Hunk
	}{
		{"hunk after an end-of-file hunk", "@@\n a\n*** End of File\n@@\n b", []Hunk{
			{Line: 3, EndOfFile: true, Lines: []Line{{Context, "a"}}}, {Line: 6, Lines: []Line{{Context, "b"}}}}},
		{"end of file after a blank only", "@@\n\n*** End of File", []Hunk{{Line: 3, EndOfFile: true, Lines: []Line{{Context, ""}}}}},
		{"trailing space-only line is context", "@@\n a\n  ", []Hunk{{Line: 3, Lines: []Line{{Context, "a"}, {Context, " "}}}}},
		{"range without closing @@", "@@ -1 +1\n a", []Hunk{{Anchor: "-1 +1", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"range without a second range", "@@ -1 x @@ y\n a", []Hunk{{Anchor: "-1 x @@ y", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"ranges without closing @@", "@@ -1 +1 x\n a", []Hunk{{Anchor: "-1 +1 x", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"range with two commas", "@@ -1,2,3 +1 @@ x\n a", []Hunk{{Anchor: "-1,2,3 +1 @@ x", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"range starting with a comma", "@@ -,2 +1 @@ x\n a", []Hunk{{Anchor: "-,2 +1 @@ x", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"range ending with a comma", "@@ -1, +1 @@ x\n a", []Hunk{{Anchor: "-1, +1 @@ x", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"sign without digits", "@@ - +1 @@ x\n a", []Hunk{{Anchor: "- +1 @@ x", Line: 3, Lines: []Line{{Context, "a"}}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse("*** Begin Patch\n*** Update File: f\n" + tc.body + "\n*** End Patch")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Ops[0].Hunks, tc.hunks) {
				t.Fatalf("hunks\n%#v\nwant\n%#v", p.Ops[0].Hunks, tc.hunks)
			}
		})
	}
}

// TestParseErrorEdges complements TestParseErrors with the line numbers
// and messages of rarer mistakes.
func TestParseErrorEdges(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name string
		text string
		line int
		msg  string
	}{
		{"no end, trailing blank lines", "*** Begin Patch\n*** Delete File: a\n\n\n", 2, "missing \"*** End Patch\""},
		{"end of file twice", "*** Begin Patch\n*** Update File: a\n@@\n a\n*** End of File\n*** End of File\n*** End Patch", 6, "must end a hunk that has lines"},
		{"second begin", "*** Begin Patch\n*** Add File: a\n+x\n*** Begin Patch\n*** End Patch", 4, `unknown marker "*** Begin Patch"`},
		{"long line clipped", "*** Begin Patch\n" + long + "\n*** End Patch", 2, `got "` + long[:80] + `…"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.text)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %v, want a *ParseError", err)
			}
			if pe.Line != tc.line || !strings.Contains(pe.Msg, tc.msg) {
				t.Fatalf("got %v, want line %d containing %q", err, tc.line, tc.msg)
			}
		})
	}
}

// TestApplyEdges covers placement details: a line that is only "\r\n", an
// anchor that also occurs before the previous hunk (which the search no
// longer sees).
func TestApplyEdges(t *testing.T) {
	tests := []struct {
		name, content, body, want string
	}{
		{"line of only CRLF", "\r\nx\r\n", "@@\n \n-x\n+y", "\r\ny\r\n"},
		{"anchor searched after the previous hunk", "f\na\nf\nb\n", "@@\n-a\n+A\n@@ f\n-b\n+B", "f\nA\nf\nB\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Apply([]byte(tc.content), hunks(t, tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

// TestApplyErrorEdges: an end-of-file hunk cannot reach back over the
// previous hunk, and a hunk whose context is missing below its anchor
// reports the line after the anchor as where the search started.
func TestApplyErrorEdges(t *testing.T) {
	tests := []struct {
		name, content, body string
		want                HunkError
		msg                 string
	}{
		{"end of file overlaps the previous hunk", "a\nb\n", "@@\n-a\n-b\n+c\n@@\n b\n+d\n*** End of File",
			HunkError{Hunk: 2, Problem: ContextMissing, From: 3, Expected: []string{"b"}, EndOfFile: true},
			"hunk 2: context not found at the end of the file (searched from line 3"},
		{"context missing below the anchor", "x\ny\nf\nz\n", "@@ f\n-y\n+Y",
			HunkError{Hunk: 1, Problem: ContextMissing, From: 3, Anchor: "f", Expected: []string{"y"}},
			"hunk 1: context not found (searched from line 3, after the previous hunk or anchor)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Apply([]byte(tc.content), hunks(t, tc.body))
			var he *HunkError
			if !errors.As(err, &he) {
				t.Fatalf("got %v, want *HunkError", err)
			}
			if !reflect.DeepEqual(*he, tc.want) {
				t.Fatalf("got %#v\nwant %#v", *he, tc.want)
			}
			if !strings.Contains(he.Error(), tc.msg) {
				t.Fatalf("message %q lacks %q", he.Error(), tc.msg)
			}
		})
	}
}

// TestHunkErrorMessages pins whole messages: at most maxQuoted expected
// lines are quoted, and a problem the package does not know still names
// the hunk.
func TestHunkErrorMessages(t *testing.T) {
	expected := make([]string, maxQuoted+2)
	var quoted strings.Builder
	for i := range expected {
		expected[i] = string(rune('a' + i))
		if i < maxQuoted {
			quoted.WriteString("\n  \"" + expected[i] + "\"")
		}
	}
	tests := []struct {
		err  HunkError
		want string
	}{
		{HunkError{Hunk: 2, Problem: ContextMissing, From: 1, Expected: expected},
			"hunk 2: context not found; expected lines:" + quoted.String() + "\n  … (2 more)"},
		{HunkError{Hunk: 1, Problem: Problem(0)}, "hunk 1: cannot be placed"},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("got %q\nwant %q", got, tc.want)
		}
	}
}
