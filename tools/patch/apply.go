package patch

import (
	"hash/maphash"
	"strings"
)

// fileLine is one line of a file: its text and its own ending ("\n",
// "\r\n", or "" for a last line without a newline).
type fileLine struct {
	text string
	eol  string
}

// splitFile splits content into lines, remembering each line's ending.
func splitFile(content []byte) []fileLine {
	s := string(content)
	lines := make([]fileLine, 0, strings.Count(s, "\n")+1)
	for len(s) > 0 {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, fileLine{text: s})
			break
		}
		if i > 0 && s[i-1] == '\r' {
			lines = append(lines, fileLine{text: s[:i-1], eol: "\r\n"})
		} else {
			lines = append(lines, fileLine{text: s[:i], eol: "\n"})
		}
		s = s[i+1:]
	}
	return lines
}

// dominantEOL returns "\r\n" when most line endings are CRLF, else "\n".
func dominantEOL(lines []fileLine) string {
	crlf, lf := 0, 0
	for _, l := range lines {
		switch l.eol {
		case "\r\n":
			crlf++
		case "\n":
			lf++
		}
	}
	if crlf > lf {
		return "\r\n"
	}
	return "\n"
}

// edit replaces del lines at index at with repl.
type edit struct {
	at, del int
	repl    []fileLine
}

// Apply applies hunks, in order, to content and returns the new content.
// It fails with a *HunkError naming the first hunk that does not match
// exactly once; content is never modified.
func Apply(content []byte, hunks []Hunk) ([]byte, error) {
	lines := splitFile(content)
	eol := dominantEOL(lines)
	finalNewline := len(lines) == 0 || lines[len(lines)-1].eol != ""
	edits := make([]edit, 0, len(hunks))
	cursor := 0
	f := newFile(lines)
	for i, h := range hunks {
		e, err := f.place(cursor, i+1, h, eol)
		if err != nil {
			return nil, err
		}
		edits = append(edits, e)
		cursor = e.at + e.del
	}
	out := make([]fileLine, 0, len(lines)+16)
	prev := 0
	for _, e := range edits {
		out = append(out, lines[prev:e.at]...)
		out = append(out, e.repl...)
		prev = e.at + e.del
	}
	out = append(out, lines[prev:]...)
	size := 0
	for i := range out {
		if out[i].eol == "" && i < len(out)-1 {
			out[i].eol = eol
		}
		size += len(out[i].text) + 2
	}
	if n := len(out); n > 0 {
		switch {
		case !finalNewline:
			out[n-1].eol = ""
		case out[n-1].eol == "":
			out[n-1].eol = eol
		}
	}
	b := make([]byte, 0, size)
	for _, l := range out {
		b = append(b, l.text...)
		b = append(b, l.eol...)
	}
	return b, nil
}

// file is the line view of a file being patched.
type file struct {
	lines []fileLine
	// hashes holds a hash of every line's text, so that searching for a
	// hunk compares one integer per line before comparing text.
	hashes []uint64
	seed   maphash.Seed
}

func newFile(lines []fileLine) *file {
	f := &file{lines: lines, hashes: make([]uint64, len(lines)), seed: maphash.MakeSeed()}
	for i, l := range lines {
		f.hashes[i] = maphash.String(f.seed, l.text)
	}
	return f
}

// place finds where hunk number n goes, searching lines from cursor, and
// returns the edit it makes.
func (f *file) place(cursor, n int, h Hunk, eol string) (edit, error) {
	lines := f.lines
	start := cursor
	if h.Anchor != "" {
		at := findAnchor(lines, cursor, h.Anchor)
		switch {
		case len(at) == 0:
			return edit{}, &HunkError{Hunk: n, Problem: AnchorMissing, From: cursor + 1, Anchor: h.Anchor}
		case len(at) > 1:
			return edit{}, &HunkError{Hunk: n, Problem: AnchorAmbiguous, From: cursor + 1, Anchor: h.Anchor, Matches: oneBased(at)}
		}
		start = at[0]
	}
	old := h.Old()
	var at int
	switch {
	case len(old) == 0 && h.Anchor != "":
		// Pure insertion after the anchor line.
		at = start + 1
	case len(old) == 0:
		at = len(lines)
	default:
		matches := f.findContext(start, old, h.EndOfFile)
		switch {
		case len(matches) == 0:
			return edit{}, &HunkError{Hunk: n, Problem: ContextMissing, From: start + 1, Anchor: h.Anchor, Expected: old, EndOfFile: h.EndOfFile}
		case len(matches) > 1:
			return edit{}, &HunkError{Hunk: n, Problem: ContextAmbiguous, From: start + 1, Anchor: h.Anchor, Expected: old, Matches: oneBased(matches)}
		}
		at = matches[0]
	}
	repl := make([]fileLine, 0, len(h.Lines))
	j := at
	for _, l := range h.Lines {
		switch l.Kind {
		case Context:
			repl = append(repl, lines[j])
			j++
		case Remove:
			j++
		case Insert:
			repl = append(repl, fileLine{text: l.Text, eol: eol})
		}
	}
	return edit{at: at, del: len(old), repl: repl}, nil
}

// findAnchor returns the indexes at or after from of lines matching anchor,
// exactly or with surrounding white space trimmed.
func findAnchor(lines []fileLine, from int, anchor string) []int {
	trimmed := strings.TrimSpace(anchor)
	var at []int
	for i := from; i < len(lines); i++ {
		if lines[i].text == anchor || strings.TrimSpace(lines[i].text) == trimmed {
			at = append(at, i)
		}
	}
	return at
}

// maxMatches bounds how many candidate positions findContext collects: two
// prove ambiguity, a few more make a useful error message.
const maxMatches = 6

// findContext returns the indexes at or after from where old occurs. An
// end-of-file hunk may only match at the end.
func (f *file) findContext(from int, old []string, endOfFile bool) []int {
	lines := f.lines
	last := len(lines) - len(old)
	if last < from {
		return nil
	}
	if endOfFile {
		if equalAt(lines, last, old) {
			return []int{last}
		}
		return nil
	}
	var at []int
	first := maphash.String(f.seed, old[0])
	for i := from; i <= last && len(at) < maxMatches; i++ {
		if f.hashes[i] == first && equalAt(lines, i, old) {
			at = append(at, i)
		}
	}
	return at
}

func equalAt(lines []fileLine, i int, old []string) bool {
	for j, s := range old {
		if lines[i+j].text != s {
			return false
		}
	}
	return true
}

func oneBased(idx []int) []int {
	out := make([]int, len(idx))
	for i, v := range idx {
		out[i] = v + 1
	}
	return out
}
