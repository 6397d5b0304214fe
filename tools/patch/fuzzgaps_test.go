package patch

import (
	"errors"
	"strings"
	"testing"
)

// FuzzApplyParsed applies the hunks of any parsed update to any file: Apply
// never panics and never changes its input; a failure is a *HunkError
// naming one of the hunks; a success keeps every line the hunks do not
// touch, so that (for a file of LF lines without CRs, which splitting and
// joining keep exactly) the result has the file's lines plus the inserted
// minus the removed ones, and the inserted lines appear in it in order.
func FuzzApplyParsed(f *testing.F) {
	for _, s := range [][2]string{
		{"a\nb\nc\n", "*** Begin Patch\n*** Update File: f\n@@\n a\n-b\n+B\n c\n*** End Patch"},
		{"func f() {\n\treturn 1\n}\n", "*** Begin Patch\n*** Update File: f\n@@ func f() {\n-\treturn 1\n+\treturn 2\n*** End Patch"},
		{"x\ny\nx\ny\n", "*** Begin Patch\n*** Update File: f\n@@\n x\n-y\n+Y\n@@\n x\n-y\n+Z\n*** End Patch"},
		{"a\nb", "*** Begin Patch\n*** Update File: f\n@@\n-b\n+c\n*** End of File\n*** End Patch"},
		{"", "*** Begin Patch\n*** Update File: f\n@@\n+new\n*** End Patch"},
		{"one\r\ntwo\r\n", "*** Begin Patch\n*** Update File: f\n@@ one\n+1.5\n*** End Patch"},
		{"a\n\n\nb\n", "*** Begin Patch\n*** Update File: f\n@@\n \n-\n+c\n*** End Patch"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, content, text string) {
		p, err := Parse(text)
		if err != nil {
			return
		}
		for _, op := range p.Ops {
			if op.Kind != Update {
				continue
			}
			in := []byte(content)
			out, err := Apply(in, op.Hunks)
			if string(in) != content {
				t.Fatal("Apply changed its input")
			}
			if err != nil {
				var he *HunkError
				if !errors.As(err, &he) || he.Hunk < 1 || he.Hunk > len(op.Hunks) {
					t.Fatalf("error %v (%T) names no hunk of %d", err, err, len(op.Hunks))
				}
				continue
			}
			clean := !strings.Contains(content, "\r") && !strings.Contains(text, "\r") &&
				(content == "" || strings.HasSuffix(content, "\n"))
			if !clean {
				continue
			}
			lines := func(s string) []string {
				if s == "" {
					return nil
				}
				return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
			}
			var inserted []string
			removed := 0
			for _, h := range op.Hunks {
				for _, l := range h.Lines {
					switch l.Kind {
					case Insert:
						inserted = append(inserted, l.Text)
					case Remove:
						removed++
					}
				}
			}
			got, had := lines(string(out)), lines(content)
			if len(got) != len(had)+len(inserted)-removed {
				t.Fatalf("%d lines, then %d with %d inserted and %d removed: %q -> %q", len(had), len(got), len(inserted), removed, content, out)
			}
			if len(out) > 0 && !strings.HasSuffix(string(out), "\n") {
				t.Fatalf("a file ending in a newline lost it: %q -> %q", content, out)
			}
			rest := got
			for _, want := range inserted {
				i := 0
				for i < len(rest) && rest[i] != want {
					i++
				}
				if i == len(rest) {
					t.Fatalf("inserted line %q missing or out of order in %q", want, out)
				}
				rest = rest[i+1:]
			}
		}
	})
}
