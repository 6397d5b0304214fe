package patch

import (
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
