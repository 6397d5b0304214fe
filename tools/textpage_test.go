package tools

import (
	"bufio"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// naiveLines splits content the way read counts lines: "\n" ends a line,
// a final unterminated line counts, "\r\n" endings lose their '\r'.
func naiveLines(content string) []string {
	if content == "" {
		return nil
	}
	terminated := strings.HasSuffix(content, "\n")
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	for i := range lines {
		if i < len(lines)-1 || terminated {
			lines[i] = strings.TrimSuffix(lines[i], "\r")
		}
	}
	return lines
}

// FuzzReadTextPage checks the streaming pager against a naive split of the
// whole content, with a tiny bufio buffer so that lines straddle buffers.
func FuzzReadTextPage(f *testing.F) {
	f.Add("a\nb\nc\n", 2, 1, 100)
	f.Add("one\r\ntwo\r\nthree", 1, 5, 3)
	f.Add(strings.Repeat("0123456789", 10)+"\nshort\n", 1, 2, 7)
	f.Add("é\nü\n", 3, 1, 1)
	f.Add("", 1, 10, 10)
	f.Add("x\r", 1, 1, 10)
	f.Fuzz(func(t *testing.T, content string, offset, limit, maxLine int) {
		if !utf8.ValidString(content) || offset < 1 || offset > 1000 || limit < 1 || limit > 1000 || maxLine < 4 || maxLine > 200 {
			return
		}
		br := bufio.NewReaderSize(strings.NewReader(content), 16)
		page, err := readTextPage(context.Background(), br, pageLimits{offset: offset, limit: limit, maxLine: maxLine, maxPage: 1 << 30})
		lines := naiveLines(content)
		var beyond *errOffsetBeyondEnd
		if offset > 1 && offset > len(lines) {
			if !errors.As(err, &beyond) || beyond.lines != len(lines) {
				t.Fatalf("offset %d of %d lines: got %v", offset, len(lines), err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		want := lines[min(offset-1, len(lines)):min(offset-1+limit, len(lines))]
		if len(page.lines) != len(want) {
			t.Fatalf("got %d lines, want %d", len(page.lines), len(want))
		}
		for i, full := range want {
			got := page.lines[i]
			if len(full) <= maxLine {
				if got != full {
					t.Fatalf("line %d: got %q, want %q", offset+i, got, full)
				}
				continue
			}
			// The marker follows the kept text, which may hold the
			// marker's own words: it is their last occurrence.
			const mark = "… [line truncated: "
			cut := strings.LastIndex(got, mark)
			if cut < 0 {
				t.Fatalf("line %d: %q of %d bytes (max %d) has no truncation marker", offset+i, got, len(full), maxLine)
			}
			prefix, marker := got[:cut], got[cut+len(mark):]
			if !strings.HasPrefix(full, prefix) || len(prefix) > maxLine || len(prefix) < maxLine-utf8.UTFMax+1 {
				t.Fatalf("line %d: truncated %q does not fit %q (max %d)", offset+i, got, full, maxLine)
			}
			dropped, err := strconv.Atoi(strings.TrimSuffix(marker, " more bytes]"))
			if err != nil || len(prefix)+dropped != len(full) {
				t.Fatalf("line %d: marker %q, but %d bytes were cut", offset+i, marker, len(full)-len(prefix))
			}
		}
		end := offset - 1 + len(want)
		switch {
		case end < len(lines) && page.next != end+1:
			t.Fatalf("next %d, want %d", page.next, end+1)
		case end == len(lines) && (page.next != 0 || page.total != len(lines)):
			t.Fatalf("at the end: next %d total %d, want 0 and %d", page.next, page.total, len(lines))
		}
	})
}
