package tools

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/sessiond/sessiond/tools/internal/runes"
)

// readBufferSize is the bufio buffer of text paging: lines are streamed
// through it, so memory stays bounded whatever the file size.
const readBufferSize = 64 << 10

// textPage is one page of a UTF-8 text file.
type textPage struct {
	// first is the one-based number of the first line of lines.
	first int
	// lines are the page's lines, without endings, long lines truncated.
	lines []string
	// next is the one-based offset of the first line after the page, or 0
	// at the end of the file.
	next int
	// total is the number of lines in the file when the page reached the
	// end of the file, else 0.
	total int
	// truncated counts the page's truncated lines.
	truncated int
}

// pageLimits bounds one page.
type pageLimits struct {
	offset, limit int // one-based first line, maximum lines
	maxLine       int // bytes kept of one line
	maxPage       int // bytes of kept line text in the page
}

// ctxCheckChunks is how often (in buffers) skipping checks for
// cancellation: every 64 buffers, about 4 MiB.
const ctxCheckChunks = 64

// errOffsetBeyondEnd reports an offset past the last line.
type errOffsetBeyondEnd struct{ offset, lines int }

// Error implements error.
func (e *errOffsetBeyondEnd) Error() string {
	return fmt.Sprintf("offset %d is beyond the end of the file, which has %d lines", e.offset, e.lines)
}

// readTextPage streams br to the page described by lim. It never holds more
// than one buffer and the page's kept text in memory.
func readTextPage(ctx context.Context, br *bufio.Reader, lim pageLimits) (textPage, error) {
	page := textPage{first: lim.offset}
	if skipped, err := skipLines(ctx, br, lim.offset-1); err != nil {
		return page, err
	} else if skipped < lim.offset-1 {
		return page, &errOffsetBeyondEnd{offset: lim.offset, lines: skipped}
	}
	size := 0
	for len(page.lines) < lim.limit {
		line, dropped, ok, err := readLine(ctx, br, lim.maxLine)
		if err != nil {
			return page, err
		}
		if !ok {
			page.total = lim.offset - 1 + len(page.lines)
			break
		}
		text := strings.ToValidUTF8(string(line), "\uFFFD")
		if dropped > 0 {
			text += fmt.Sprintf("… [line truncated: %d more bytes]", dropped)
		}
		if size+len(text) > lim.maxPage && len(page.lines) > 0 {
			// The line was consumed but is not shown; the cursor points at it.
			page.next = lim.offset + len(page.lines)
			return page, nil
		}
		if dropped > 0 {
			page.truncated++
		}
		size += len(text)
		page.lines = append(page.lines, text)
	}
	if len(page.lines) == 0 && lim.offset > 1 {
		return page, &errOffsetBeyondEnd{offset: lim.offset, lines: lim.offset - 1}
	}
	if page.total == 0 && len(page.lines) == lim.limit {
		if _, err := br.Peek(1); err == nil {
			page.next = lim.offset + len(page.lines)
		} else if errors.Is(err, io.EOF) {
			page.total = lim.offset - 1 + len(page.lines)
		} else {
			return page, err
		}
	}
	return page, nil
}

// skipLines consumes n lines, counting newlines a buffer at a time. It
// returns how many lines it consumed: fewer than n at the end of the input,
// where a final line without a newline counts.
func skipLines(ctx context.Context, br *bufio.Reader, n int) (int, error) {
	skipped := 0
	partial := false // bytes of an unterminated line were consumed
	for chunk := 0; skipped < n; chunk++ {
		if chunk%ctxCheckChunks == 0 && ctx.Err() != nil {
			return skipped, ctx.Err()
		}
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				if errors.Is(err, io.EOF) {
					if partial {
						skipped++
					}
					return skipped, nil
				}
				return skipped, err
			}
		}
		buf, _ := br.Peek(br.Buffered())
		if c := bytes.Count(buf, newline); skipped+c < n {
			skipped += c
			partial = buf[len(buf)-1] != '\n'
			if _, err := br.Discard(len(buf)); err != nil {
				return skipped, err
			}
			continue
		}
		i := 0
		for skipped < n {
			i += bytes.IndexByte(buf[i:], '\n') + 1
			skipped++
		}
		if _, err := br.Discard(i); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

var newline = []byte{'\n'}

// readLine reads one line, keeping at most max bytes of it (cut at a rune
// boundary) and counting the rest in dropped. The line ending ("\n" or
// "\r\n") is neither kept nor counted. ok is false at the end of the input.
// A line can be the rest of a huge (or sparse) file, so ctx is checked
// every ctxCheckChunks buffers.
func readLine(ctx context.Context, br *bufio.Reader, max int) (line []byte, dropped int, ok bool, err error) {
	seen := 0
	newline := false
	var last byte // last content byte, to recognise a "\r\n" ending
	for chunk := 0; ; chunk++ {
		if chunk%ctxCheckChunks == 0 && ctx.Err() != nil {
			return nil, 0, false, ctx.Err()
		}
		frag, ferr := br.ReadSlice('\n')
		seen += len(frag)
		if ferr == nil {
			newline = true
			frag = frag[:len(frag)-1]
		}
		if len(frag) > 0 {
			last = frag[len(frag)-1]
		}
		if room := max - len(line); room > 0 {
			take := min(room, len(frag))
			line = append(line, frag[:take]...)
			dropped += len(frag) - take
		} else {
			dropped += len(frag)
		}
		switch {
		case ferr == nil:
		case errors.Is(ferr, bufio.ErrBufferFull):
			continue
		case errors.Is(ferr, io.EOF):
			if seen == 0 {
				return nil, 0, false, nil
			}
		default:
			return nil, 0, false, ferr
		}
		break
	}
	if dropped == 0 {
		line = trimCR(line, newline)
	} else if newline && last == '\r' {
		// The ending's '\r' went with the dropped tail; it is not content.
		dropped--
	}
	if dropped > 0 {
		// Do not show half a rune.
		cut := runes.Whole(line)
		dropped += len(line) - cut
		line = line[:cut]
	}
	return line, dropped, true, nil
}

// trimCR removes the '\r' of a "\r\n" ending.
func trimCR(line []byte, newline bool) []byte {
	if newline && len(line) > 0 && line[len(line)-1] == '\r' {
		return line[:len(line)-1]
	}
	return line
}
