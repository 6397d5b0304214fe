package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	text := strings.Join([]string{
		"",
		"*** Begin Patch",
		"*** Add File: docs/new.md",
		"+# Title",
		"+",
		"+body",
		"*** Update File: main.go",
		"@@ func main() {",
		" \tx := 1",
		"-\treturn",
		"+\tos.Exit(0)",
		"",
		"@@",
		"-old",
		"+new",
		"*** End of File",
		"",
		"*** Delete File: old.txt",
		"*** Update File: a.txt",
		"*** Move to: b.txt",
		" keep",
		"+more",
		"*** End Patch",
		"",
	}, "\r\n")
	got, err := Parse(text)
	if err != nil {
		t.Fatal(err)
	}
	want := &Patch{Ops: []Op{
		{Kind: Add, Path: "docs/new.md", Content: []string{"# Title", "", "body"}, Line: 3},
		{Kind: Update, Path: "main.go", Line: 7, Hunks: []Hunk{
			{Anchor: "func main() {", Line: 8, Lines: []Line{{Context, "\tx := 1"}, {Remove, "\treturn"}, {Insert, "\tos.Exit(0)"}}},
			{Line: 13, EndOfFile: true, Lines: []Line{{Remove, "old"}, {Insert, "new"}}},
		}},
		{Kind: Delete, Path: "old.txt", Line: 18},
		{Kind: Update, Path: "a.txt", MoveTo: "b.txt", Line: 19, Hunks: []Hunk{
			{Line: 21, Lines: []Line{{Context, "keep"}, {Insert, "more"}}},
		}},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Parse:\n%#v\nwant:\n%#v", got, want)
	}
	if string(got.Ops[0].NewContent()) != "# Title\n\nbody\n" {
		t.Fatalf("NewContent %q", got.Ops[0].NewContent())
	}
}

func TestParseHunkDetails(t *testing.T) {
	tests := []struct {
		name  string
		body  string
		hunks []Hunk
	}{
		{"unified range header", "@@ -10,3 +10,4 @@ func f() {\n a\n+b", []Hunk{{Anchor: "func f() {", Line: 3, Lines: []Line{{Context, "a"}, {Insert, "b"}}}}},
		{"unified range without anchor", "@@ -1 +1 @@\n-a\n+b", []Hunk{{Line: 3, Lines: []Line{{Remove, "a"}, {Insert, "b"}}}}},
		{"anchor with indentation kept", "@@ \tfunc f() {\n a", []Hunk{{Anchor: "\tfunc f() {", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"interior bare blank is context", "@@\n a\n\n b", []Hunk{{Line: 3, Lines: []Line{{Context, "a"}, {Context, ""}, {Context, "b"}}}}},
		{"trailing bare blanks separate hunks", "@@\n a\n\n\n@@\n b", []Hunk{{Line: 3, Lines: []Line{{Context, "a"}}}, {Line: 7, Lines: []Line{{Context, "b"}}}}},
		{"blank before end of file is context", "@@\n a\n\n*** End of File", []Hunk{{Line: 3, EndOfFile: true, Lines: []Line{{Context, "a"}, {Context, ""}}}}},
		{"space-only line is context with text", "@@\n a\n  \n b", []Hunk{{Line: 3, Lines: []Line{{Context, "a"}, {Context, " "}, {Context, "b"}}}}},
		{"white-space-only anchor is none", "@@ \t\r\r\n a", []Hunk{{Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"anchor loses a stray carriage return", "@@ x\r\r\n a", []Hunk{{Anchor: "x", Line: 3, Lines: []Line{{Context, "a"}}}}},
		{"leading blank before header ignored", "\n@@ x\n a", []Hunk{{Anchor: "x", Line: 4, Lines: []Line{{Context, "a"}}}}},
		{"marker-like content", "@@\n-*** End Patch\n+*** Not a marker", []Hunk{{Line: 3, Lines: []Line{{Remove, "*** End Patch"}, {Insert, "*** Not a marker"}}}}},
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

func TestParseErrors(t *testing.T) {
	long := strings.Repeat("x", 100)
	tests := []struct {
		name string
		text string
		line int
		msg  string
	}{
		{"empty", "", 1, "empty patch"},
		{"no begin", "*** Update File: a\n@@\n-a\n*** End Patch", 1, `expected "*** Begin Patch"`},
		{"no end", "*** Begin Patch\n*** Delete File: a", 2, "missing \"*** End Patch\" after the last line"},
		{"no operations", "*** Begin Patch\n*** End Patch", 2, "no file operations"},
		{"text after end", "*** Begin Patch\n*** Delete File: a\n*** End Patch\ngarbage", 4, "unexpected text after"},
		{"unknown marker", "*** Begin Patch\n*** Rename File: a\n*** End Patch", 2, "unknown marker"},
		{"stray text", "*** Begin Patch\nhello\n*** End Patch", 2, "expected a file operation"},
		{"missing path", "*** Begin Patch\n*** Add File: \n+x\n*** End Patch", 2, "missing file path"},
		{"add without plus", "*** Begin Patch\n*** Add File: a\n+x\ny\n*** End Patch", 4, "must start with '+'"},
		{"delete with body", "*** Begin Patch\n*** Delete File: a\n-x\n*** End Patch", 3, "takes no body"},
		{"update without hunks", "*** Begin Patch\n*** Update File: a\n*** End Patch", 2, "has no hunks"},
		{"bad hunk line", "*** Begin Patch\n*** Update File: a\n@@\n a\n#x\n*** End Patch", 5, "must start with ' ', '-' or '+'"},
		{"empty hunk", "*** Begin Patch\n*** Update File: a\n@@\n@@\n a\n*** End Patch", 3, "hunk 1 of a has no lines"},
		{"empty last hunk", "*** Begin Patch\n*** Update File: a\n@@\n a\n@@\n*** End Patch", 5, "hunk 2 of a has no lines"},
		{"end of file without lines", "*** Begin Patch\n*** Update File: a\n@@\n*** End of File\n*** End Patch", 4, "must end a hunk"},
		{"lines after end of file", "*** Begin Patch\n*** Update File: a\n@@\n a\n*** End of File\n b\n*** End Patch", 6, "must be followed by"},
		{"stray move", "*** Begin Patch\n*** Delete File: a\n*** Move to: b\n*** End Patch", 3, "must directly follow"},
		{"duplicate path", "*** Begin Patch\n*** Delete File: a\n*** Add File: a\n+x\n*** End Patch", 3, "more than one file operation (lines 2 and 3)"},
		{"NUL in path", "*** Begin Patch\n*** Delete File: a\x00b\n*** End Patch", 2, "NUL"},
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

func TestKindNames(t *testing.T) {
	for k, want := range map[Kind][2]string{Add: {"add", "A"}, Update: {"update", "M"}, Delete: {"delete", "D"}, Kind(9): {"Kind(9)", "?"}} {
		if k.String() != want[0] || k.Letter() != want[1] {
			t.Errorf("%d: %s %s", int(k), k.String(), k.Letter())
		}
	}
}
