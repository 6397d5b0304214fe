package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// hunks parses the hunks of a one-file update body.
func hunks(t *testing.T, body string) []Hunk {
	t.Helper()
	p, err := Parse("*** Begin Patch\n*** Update File: f\n" + body + "\n*** End Patch")
	if err != nil {
		t.Fatal(err)
	}
	return p.Ops[0].Hunks
}

func TestApply(t *testing.T) {
	tests := []struct {
		name, content, body, want string
	}{
		{"replace middle", "a\nb\nc\n", "@@\n a\n-b\n+B\n c", "a\nB\nc\n"},
		{"two hunks in order", "1\n2\n3\n4\n5\n6\n", "@@\n 1\n-2\n+two\n@@\n 5\n-6\n+six", "1\ntwo\n3\n4\n5\nsix\n"},
		{"anchor narrows", "func a() {\n\treturn\n}\nfunc b() {\n\treturn\n}\n", "@@ func b() {\n-\treturn\n+\treturn nil", "func a() {\n\treturn\n}\nfunc b() {\n\treturn nil\n}\n"},
		{"anchor matches trimmed", "class A:\n    def f(self):\n        pass\n", "@@ def f(self):\n-        pass\n+        return 1", "class A:\n    def f(self):\n        return 1\n"},
		{"anchor is also first context line", "x\nfunc f() {\n}\n", "@@ func f() {\n func f() {\n+\t// body\n }", "x\nfunc f() {\n\t// body\n}\n"},
		{"insert after anchor", "a\nb\nc\n", "@@ b\n+inserted", "a\nb\ninserted\nc\n"},
		{"append without anchor", "a\nb\n", "@@\n+c", "a\nb\nc\n"},
		{"end of file", "x\ny\nx\ny\n", "@@\n x\n-y\n+z\n*** End of File", "x\ny\nx\nz\n"},
		{"crlf preserved", "a\r\nb\r\nc\r\n", "@@\n a\n-b\n+B\n+B2\n c", "a\r\nB\r\nB2\r\nc\r\n"},
		{"no trailing newline preserved", "a\nb", "@@\n a\n-b\n+B", "a\nB"},
		{"append to file without trailing newline", "a\nb", "@@\n b\n+c", "a\nb\nc"},
		{"remove last line of file without newline", "a\nb", "@@\n a\n-b", "a"},
		{"remove everything", "a\nb\n", "@@\n-a\n-b", ""},
		{"add to empty file", "", "@@\n+first", "first\n"},
		{"mixed endings keep their own", "a\r\nb\nc\r\n", "@@\n a\n b\n+n\n c", "a\r\nb\nn\r\nc\r\n"},
		{"lf majority", "a\nb\nc\r\n", "@@\n a\n+n\n b", "a\nn\nb\nc\r\n"},
		{"unicode", "héllo\nwörld\n", "@@\n-wörld\n+мир", "héllo\nмир\n"},
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

func TestApplyErrors(t *testing.T) {
	tests := []struct {
		name, content, body string
		want                HunkError
		msg                 string
	}{
		{"missing", "a\nb\n", "@@\n-c\n+d", HunkError{Hunk: 1, From: 1, Problem: ContextMissing, Expected: []string{"c"}}, `hunk 1: context not found; expected lines:` + "\n  \"c\""},
		{"ambiguous", "x\ny\nx\ny\n", "@@\n x\n-y\n+z", HunkError{Hunk: 1, From: 1, Problem: ContextAmbiguous, Expected: []string{"x", "y"}, Matches: []int{1, 3}}, "matches at lines 1, 3"},
		{"second hunk missing after first", "a\nb\nc\n", "@@\n-b\n+B\n@@\n-a\n+A", HunkError{Hunk: 2, Problem: ContextMissing, From: 3, Expected: []string{"a"}}, "hunk 2: context not found (searched from line 3"},
		{"anchor missing", "a\n", "@@ nope\n-a", HunkError{Hunk: 1, From: 1, Problem: AnchorMissing, Anchor: "nope"}, `anchor line "nope" not found`},
		{"anchor ambiguous", "}\na\n}\n", "@@ }\n-a", HunkError{Hunk: 1, From: 1, Problem: AnchorAmbiguous, Anchor: "}", Matches: []int{1, 3}}, "matches lines 1, 3"},
		{"end of file mismatch", "x\ny\nz\n", "@@\n-y\n*** End of File", HunkError{Hunk: 1, From: 1, Problem: ContextMissing, Expected: []string{"y"}, EndOfFile: true}, "at the end of the file"},
		{"whitespace differs", "\tindented\n", "@@\n-  indented\n+x", HunkError{Hunk: 1, From: 1, Problem: ContextMissing, Expected: []string{"  indented"}}, "context not found"},
		{"longer than file", "a\n", "@@\n a\n b\n+c", HunkError{Hunk: 1, From: 1, Problem: ContextMissing, Expected: []string{"a", "b"}}, "context not found"},
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

func TestHunkErrorListsAreBounded(t *testing.T) {
	content := strings.Repeat("dup\n", 20)
	_, err := Apply([]byte(content), hunks(t, "@@\n-dup\n+x"))
	var he *HunkError
	if !errors.As(err, &he) || len(he.Matches) != maxMatches || !strings.Contains(he.Error(), "and 1 more") {
		t.Fatalf("got %v", err)
	}
	long := make([]string, 12)
	for i := range long {
		long[i] = "-nope"
	}
	_, err = Apply([]byte("a\n"), hunks(t, "@@\n"+strings.Join(long, "\n")))
	if !errors.As(err, &he) || !strings.Contains(he.Error(), "… (4 more)") {
		t.Fatalf("got %v", err)
	}
}
