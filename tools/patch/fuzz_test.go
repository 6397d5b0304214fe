package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// format renders a parsed patch back to text. A line whose text ends in
// "\r" is written with a CRLF ending: Parse strips one "\r" before each
// "\n", so a plain LF would lose it.
func format(p *Patch) string {
	var b strings.Builder
	line := func(s string) {
		if strings.HasSuffix(s, "\r") {
			b.WriteString(s + "\r\n")
		} else {
			b.WriteString(s + "\n")
		}
	}
	b.WriteString(BeginMarker + "\n")
	for _, op := range p.Ops {
		switch op.Kind {
		case Add:
			b.WriteString(AddMarker + " " + op.Path + "\n")
			for _, l := range op.Content {
				line("+" + l)
			}
		case Delete:
			b.WriteString(DeleteMarker + " " + op.Path + "\n")
		case Update:
			b.WriteString(UpdateMarker + " " + op.Path + "\n")
			if op.MoveTo != "" {
				b.WriteString(MoveMarker + " " + op.MoveTo + "\n")
			}
			for _, h := range op.Hunks {
				if h.Anchor != "" {
					b.WriteString("@@ " + h.Anchor + "\n")
				} else {
					b.WriteString("@@\n")
				}
				for _, l := range h.Lines {
					line(string(rune(l.Kind)) + l.Text)
				}
				if h.EndOfFile {
					b.WriteString(EndOfFileMarker + "\n")
				}
			}
		}
	}
	b.WriteString(EndMarker + "\n")
	return b.String()
}

// stripLines zeroes the source line numbers, which formatting changes.
func stripLines(p *Patch) *Patch {
	out := &Patch{Ops: make([]Op, len(p.Ops))}
	for i, op := range p.Ops {
		op.Line = 0
		hs := make([]Hunk, len(op.Hunks))
		for j, h := range op.Hunks {
			h.Line = 0
			hs[j] = h
		}
		if len(hs) == 0 {
			hs = nil
		}
		op.Hunks = hs
		out.Ops[i] = op
	}
	return out
}

func FuzzParsePatch(f *testing.F) {
	for _, seed := range []string{
		"*** Begin Patch\n*** Add File: a.txt\n+hello\n*** End Patch\n",
		"*** Begin Patch\n*** Update File: a.go\n@@ func f() {\n a\n-b\n+c\n*** End of File\n*** Delete File: x\n*** End Patch",
		"*** Begin Patch\r\n*** Update File: a\r\n*** Move to: b\r\n@@ -1,2 +1,2 @@ ctx\r\n x\r\n\r\n-y\r\n+z\r\n*** End Patch\r\n",
		"*** Begin Patch\n*** Update File: a\n x\n\n\n@@\n+y\n*** End Patch",
		"*** Begin Patch\n*** End Patch",
		"*** Begin Patch\n*** Add File: a\n+x\n*** Add File: a\n+y\n*** End Patch",
		"garbage",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		p, err := Parse(text)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Line < 1 {
				t.Fatalf("Parse error %v is not a *ParseError with a line", err)
			}
			return
		}
		if len(p.Ops) == 0 {
			t.Fatal("Parse succeeded without operations")
		}
		for _, op := range p.Ops {
			if op.Path == "" || strings.TrimSpace(op.Path) != op.Path || op.Line < 1 {
				t.Fatalf("bad op %+v", op)
			}
			if op.Kind == Update && op.MoveTo == "" && len(op.Hunks) == 0 {
				t.Fatalf("update without hunks %+v", op)
			}
			for _, h := range op.Hunks {
				if len(h.Lines) == 0 {
					t.Fatalf("empty hunk in %+v", op)
				}
				if _, ok := unifiedRange(strings.TrimSpace(h.Anchor)); ok {
					return // such anchors do not survive formatting; skip the round trip
				}
			}
		}
		again, err := Parse(format(p))
		if err != nil {
			t.Fatalf("formatted patch does not parse: %v\n%s", err, format(p))
		}
		if !reflect.DeepEqual(stripLines(again), stripLines(p)) {
			t.Fatalf("round trip changed the patch:\n%#v\n%#v", stripLines(p), stripLines(again))
		}
	})
}

// FuzzApply replaces one line inside a window of a file and checks Apply
// against a direct edit: it must succeed exactly when the window is unique
// and fail as ambiguous otherwise.
func FuzzApply(f *testing.F) {
	f.Add("a\nb\nc\nd\n", uint8(1), uint8(2), "B", false)
	f.Add("x\ny\nx\ny\n", uint8(0), uint8(1), "Y", false)
	f.Add("one\r\ntwo\r\nthree", uint8(2), uint8(0), "3", true)
	f.Add("", uint8(0), uint8(0), "new", false)
	f.Fuzz(func(t *testing.T, content string, start, length uint8, repl string, crlf bool) {
		if strings.ContainsAny(content, "\r") || strings.ContainsAny(repl, "\r\n") {
			return
		}
		body := strings.TrimSuffix(content, "\n")
		if body == "" {
			return
		}
		lines := strings.Split(body, "\n")
		trailing := strings.HasSuffix(content, "\n")
		eol := "\n"
		if crlf {
			eol = "\r\n"
		}
		file := strings.Join(lines, eol)
		if trailing {
			file += eol
		}
		s := int(start) % len(lines)
		n := 1 + int(length)%min(4, len(lines)-s)
		mid := s + n/2
		var h Hunk
		for i := s; i < s+n; i++ {
			if i == mid {
				h.Lines = append(h.Lines, Line{Remove, lines[i]}, Line{Insert, repl})
			} else {
				h.Lines = append(h.Lines, Line{Context, lines[i]})
			}
		}
		window := lines[s : s+n]
		occurrences := 0
		for i := 0; i+n <= len(lines); i++ {
			if reflect.DeepEqual(lines[i:i+n], window) {
				occurrences++
			}
		}
		got, err := Apply([]byte(file), []Hunk{h})
		if occurrences > 1 {
			var he *HunkError
			if !errors.As(err, &he) || he.Problem != ContextAmbiguous {
				t.Fatalf("window occurs %d times; got %v", occurrences, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("unique window: %v", err)
		}
		edited := append(append(append([]string{}, lines[:mid]...), repl), lines[mid+1:]...)
		want := strings.Join(edited, eol)
		if trailing {
			want += eol
		}
		if string(got) != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	})
}
