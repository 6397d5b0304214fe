package wire

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
)

// EventStream reports whether res is a 200 response with an event stream,
// the only responses whose lines RewriteLines is for.
func EventStream(res *http.Response) bool {
	return res != nil && res.StatusCode == http.StatusOK &&
		strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream")
}

// RewriteLines returns a body that reads body line by line and gives out
// each line as rewrite returns it, line ending included. rewrite may return
// line itself; line is reused once what rewrite returned has been read. An
// error of body comes after the lines read before it, and a last line
// without its ending is rewritten too.
func RewriteLines(body io.ReadCloser, rewrite func(line []byte) []byte) io.ReadCloser {
	return &lineBody{body: body, r: bufio.NewReader(body), rewrite: rewrite}
}

type lineBody struct {
	body    io.ReadCloser
	r       *bufio.Reader
	rewrite func([]byte) []byte
	line    []byte // the line being read
	pending []byte // what is left of the last line to give out
	err     error  // the body's error, once the lines before it are out
}

func (b *lineBody) Read(p []byte) (int, error) {
	for len(b.pending) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		b.line = b.line[:0]
		for {
			part, err := b.r.ReadSlice('\n')
			b.line = append(b.line, part...)
			if errors.Is(err, bufio.ErrBufferFull) {
				continue // a line longer than the buffer
			}
			b.err = err
			break
		}
		if len(b.line) > 0 {
			b.pending = b.rewrite(b.line)
		}
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *lineBody) Close() error { return b.body.Close() }
