package tools

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/sessiond/sessiond/tools/internal/runes"
)

// capture keeps the head and the tail of a command's output within a byte
// budget, counting what it drops. It is written by one goroutine and read
// after that goroutine is done.
type capture struct {
	headCap, tailCap int
	head             []byte
	// tail holds the most recent bytes after the head; it is compacted to
	// its last tailCap bytes whenever it reaches twice that.
	tail  []byte
	total int64
}

// newCapture returns a capture keeping at most max bytes, half from the
// start of the output and half from its end.
func newCapture(max int) *capture {
	h := max / 2
	return &capture{headCap: h, tailCap: max - h}
}

// Write implements io.Writer; it never fails.
func (c *capture) Write(p []byte) (int, error) {
	n := len(p)
	c.total += int64(n)
	if room := c.headCap - len(c.head); room > 0 {
		k := min(room, len(p))
		c.head = append(c.head, p[:k]...)
		p = p[k:]
	}
	if len(p) == 0 {
		return n, nil
	}
	if len(p) >= c.tailCap {
		c.tail = append(c.tail[:0], p[len(p)-c.tailCap:]...)
		return n, nil
	}
	c.tail = append(c.tail, p...)
	if len(c.tail) >= 2*c.tailCap {
		k := copy(c.tail, c.tail[len(c.tail)-c.tailCap:])
		c.tail = c.tail[:k]
	}
	return n, nil
}

// omitted returns how many bytes the capture dropped.
func (c *capture) omitted() int64 {
	kept := int64(len(c.head) + min(len(c.tail), c.tailCap))
	return c.total - kept
}

// String returns the kept output as valid UTF-8, with a marker where bytes
// were dropped.
func (c *capture) String() string {
	tail := c.tail
	if len(tail) > c.tailCap {
		tail = tail[len(tail)-c.tailCap:]
	}
	dropped := c.omitted()
	if dropped == 0 {
		return strings.ToValidUTF8(string(c.head)+string(tail), "\uFFFD")
	}
	// Cut at rune boundaries so the marker does not split characters.
	head := c.head[:runes.Whole(c.head)]
	for i := 0; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	omitted := c.total - int64(len(head)+len(tail))
	return strings.ToValidUTF8(string(head), "\uFFFD") +
		fmt.Sprintf("\n\n… [output truncated: %d bytes omitted from the middle] …\n\n", omitted) +
		strings.ToValidUTF8(string(tail), "\uFFFD")
}
