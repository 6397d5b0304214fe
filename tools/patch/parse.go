package patch

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/sessiond/sessiond/tools/internal/runes"
)

// parser holds the state of one Parse call.
type parser struct {
	lines []string
	i     int
}

// Parse parses a patch. It checks the whole structure before returning, so
// a nil error means every operation and hunk is well formed. Errors are
// *ParseError values carrying the one-based line number.
func Parse(text string) (*Patch, error) {
	p := &parser{lines: splitLines(text)}
	return p.parse()
}

// splitLines splits text into lines without their "\n" or "\r\n" endings.
func splitLines(text string) []string {
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSuffix(l, "\r")
	}
	return lines
}

func (p *parser) errorf(line int, format string, args ...any) error {
	return &ParseError{Line: line, Msg: fmt.Sprintf(format, args...)}
}

// marker returns line i with trailing white space removed, for comparing
// against markers.
func (p *parser) marker(i int) string {
	return strings.TrimRight(p.lines[i], " \t")
}

// isOpBoundary reports whether line i ends the body of an operation.
func (p *parser) isOpBoundary(i int) bool {
	m := p.marker(i)
	return m == EndMarker || m == BeginMarker || strings.HasPrefix(m, AddMarker) || strings.HasPrefix(m, UpdateMarker) ||
		strings.HasPrefix(m, DeleteMarker) || strings.HasPrefix(m, MoveMarker)
}

func (p *parser) parse() (*Patch, error) {
	for p.i < len(p.lines) && strings.TrimSpace(p.lines[p.i]) == "" {
		p.i++
	}
	if p.i == len(p.lines) {
		return nil, p.errorf(1, "empty patch: expected %q", BeginMarker)
	}
	if strings.TrimSpace(p.lines[p.i]) != BeginMarker {
		return nil, p.errorf(p.i+1, "expected %q, got %q", BeginMarker, clip(p.lines[p.i]))
	}
	p.i++
	patch := &Patch{}
	seen := make(map[string]int)
	for {
		if p.i == len(p.lines) {
			last := len(p.lines)
			for last > 1 && strings.TrimSpace(p.lines[last-1]) == "" {
				last--
			}
			return nil, p.errorf(last, "missing %q after the last line", EndMarker)
		}
		line := p.marker(p.i)
		lineNo := p.i + 1
		var op Op
		var err error
		switch {
		case strings.TrimSpace(line) == "":
			p.i++
			continue
		case line == EndMarker:
			for j := p.i + 1; j < len(p.lines); j++ {
				if strings.TrimSpace(p.lines[j]) != "" {
					return nil, p.errorf(j+1, "unexpected text after %q", EndMarker)
				}
			}
			if len(patch.Ops) == 0 {
				return nil, p.errorf(lineNo, "the patch contains no file operations")
			}
			return patch, nil
		case strings.HasPrefix(line, AddMarker):
			op, err = p.parseAdd(line[len(AddMarker):])
		case strings.HasPrefix(line, DeleteMarker):
			op, err = p.parseDelete(line[len(DeleteMarker):])
		case strings.HasPrefix(line, UpdateMarker):
			op, err = p.parseUpdate(line[len(UpdateMarker):])
		case strings.HasPrefix(line, MoveMarker):
			return nil, p.errorf(lineNo, "%q must directly follow an %q line", MoveMarker, UpdateMarker)
		case strings.HasPrefix(line, "***"):
			return nil, p.errorf(lineNo, "unknown marker %q: expected %q, %q, %q or %q", clip(line),
				AddMarker, UpdateMarker, DeleteMarker, EndMarker)
		default:
			return nil, p.errorf(lineNo, "expected a file operation (%q, %q or %q) or %q, got %q",
				AddMarker, UpdateMarker, DeleteMarker, EndMarker, clip(line))
		}
		if err != nil {
			return nil, err
		}
		if first, dup := seen[op.Path]; dup {
			return nil, p.errorf(op.Line, "%s appears in more than one file operation (lines %d and %d)", op.Path, first, op.Line)
		}
		seen[op.Path] = op.Line
		patch.Ops = append(patch.Ops, op)
	}
}

// parsePath validates the path of an operation header.
func (p *parser) parsePath(raw string, lineNo int) (string, error) {
	path := strings.TrimSpace(raw)
	if path == "" {
		return "", p.errorf(lineNo, "missing file path")
	}
	if strings.ContainsRune(path, 0) {
		return "", p.errorf(lineNo, "file path contains a NUL byte")
	}
	return path, nil
}

// bodyEnd returns the index after the last non-blank line of the body that
// starts at p.i, and the index of the boundary that ends it. Bare empty
// lines before the boundary are separators.
func (p *parser) bodyEnd() (end, boundary int) {
	boundary = p.i
	for boundary < len(p.lines) && !p.isOpBoundary(boundary) {
		boundary++
	}
	end = boundary
	for end > p.i && p.lines[end-1] == "" {
		end--
	}
	return end, boundary
}

// header starts an operation of kind at the current line, whose path is
// raw, and moves past that line.
func (p *parser) header(kind Kind, raw string) (Op, error) {
	op := Op{Kind: kind, Line: p.i + 1}
	path, err := p.parsePath(raw, op.Line)
	if err != nil {
		return op, err
	}
	op.Path = path
	p.i++
	return op, nil
}

func (p *parser) parseAdd(raw string) (Op, error) {
	op, err := p.header(Add, raw)
	if err != nil {
		return op, err
	}
	end, boundary := p.bodyEnd()
	for ; p.i < end; p.i++ {
		l := p.lines[p.i]
		switch {
		case strings.HasPrefix(l, "+"):
			op.Content = append(op.Content, l[1:])
		case l == "":
			op.Content = append(op.Content, "")
		default:
			return op, p.errorf(p.i+1, "lines of an added file must start with '+', got %q", clip(l))
		}
	}
	p.i = boundary
	return op, nil
}

func (p *parser) parseDelete(raw string) (Op, error) {
	op, err := p.header(Delete, raw)
	if err != nil {
		return op, err
	}
	end, boundary := p.bodyEnd()
	if end > p.i {
		return op, p.errorf(p.i+1, "%q takes no body, got %q", DeleteMarker, clip(p.lines[p.i]))
	}
	p.i = boundary
	return op, nil
}

func (p *parser) parseUpdate(raw string) (Op, error) {
	op, err := p.header(Update, raw)
	if err != nil {
		return op, err
	}
	if p.i < len(p.lines) && strings.HasPrefix(p.marker(p.i), MoveMarker) {
		to, err := p.parsePath(p.marker(p.i)[len(MoveMarker):], p.i+1)
		if err != nil {
			return op, err
		}
		op.MoveTo = to
		p.i++
	}
	end, boundary := p.bodyEnd()
	var h *Hunk
	closed := false // the current hunk ended with "*** End of File"
	blanks := 0     // bare empty lines not yet added to the current hunk
	for ; p.i < end; p.i++ {
		l := p.lines[p.i]
		lineNo := p.i + 1
		if strings.HasPrefix(l, "@@") {
			// Bare empty lines before a header separate hunks.
			blanks = 0
			if h != nil && len(h.Lines) == 0 {
				return op, p.errorf(h.Line, "hunk %d of %s has no lines", len(op.Hunks), op.Path)
			}
			op.Hunks = append(op.Hunks, Hunk{Anchor: parseAnchor(l), Line: lineNo})
			h = &op.Hunks[len(op.Hunks)-1]
			closed = false
			continue
		}
		if p.marker(p.i) == EndOfFileMarker {
			if h == nil || closed || len(h.Lines)+blanks == 0 {
				return op, p.errorf(lineNo, "%q must end a hunk that has lines", EndOfFileMarker)
			}
			for ; blanks > 0; blanks-- {
				h.Lines = append(h.Lines, Line{Kind: Context})
			}
			h.EndOfFile = true
			closed = true
			continue
		}
		if l == "" {
			if !closed {
				blanks++
			}
			continue
		}
		if closed {
			return op, p.errorf(lineNo, "a hunk ended by %q must be followed by \"@@\" or a file operation, got %q", EndOfFileMarker, clip(l))
		}
		var line Line
		switch {
		case l[0] == ' ' || l[0] == '-' || l[0] == '+':
			line = Line{Kind: LineKind(l[0]), Text: l[1:]}
		default:
			return op, p.errorf(lineNo, "hunk lines must start with ' ', '-' or '+' (or be a \"@@\" header), got %q", clip(l))
		}
		if h == nil {
			if len(op.Hunks) > 0 {
				return op, p.errorf(lineNo, "expected \"@@\" before hunk line %q", clip(l))
			}
			op.Hunks = append(op.Hunks, Hunk{Line: lineNo})
			h = &op.Hunks[0]
		}
		for ; blanks > 0; blanks-- {
			h.Lines = append(h.Lines, Line{Kind: Context})
		}
		h.Lines = append(h.Lines, line)
	}
	if len(op.Hunks) == 0 && op.MoveTo == "" {
		return op, p.errorf(op.Line, "update of %s has no hunks", op.Path)
	}
	if h != nil && len(h.Lines) == 0 {
		return op, p.errorf(h.Line, "hunk %d of %s has no lines", len(op.Hunks), op.Path)
	}
	p.i = boundary
	return op, nil
}

// parseAnchor returns the anchor text of a "@@" header. A unified-diff
// range header contributes only the text after its closing "@@". Trailing
// white space is dropped, including a "\r" left by a "\r\r\n" ending, so a
// header of only white space has no anchor, as a bare "@@" has none.
func parseAnchor(header string) string {
	rest := strings.TrimPrefix(header, "@@")
	trimmed := strings.TrimSpace(rest)
	if r, ok := unifiedRange(trimmed); ok {
		return strings.TrimSpace(r)
	}
	return strings.TrimRightFunc(strings.TrimPrefix(rest, " "), unicode.IsSpace)
}

// unifiedRange reports whether s starts with "-a[,b] +c[,d] @@" and returns
// the text after it.
func unifiedRange(s string) (string, bool) {
	fields := strings.SplitN(s, " ", 3)
	if len(fields) < 3 || !isRange(fields[0], '-') || !isRange(fields[1], '+') {
		return "", false
	}
	rest, ok := strings.CutPrefix(fields[2], "@@")
	return rest, ok
}

func isRange(s string, sign byte) bool {
	if len(s) < 2 || s[0] != sign {
		return false
	}
	digits, comma := 0, false
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == ',' && !comma && digits > 0:
			comma = true
			digits = 0
		default:
			return false
		}
	}
	return digits > 0
}

// clip shortens a line for an error message.
func clip(s string) string { return runes.Clip(s, 80) }
